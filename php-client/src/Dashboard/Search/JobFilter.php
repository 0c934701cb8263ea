<?php

namespace Drover\Dashboard\Search;

/**
 * A search of the console: a state and the filters on it, read from a request's query (every
 * filter is in the URL, so a search can be shared) and validated — each problem names the
 * parameter and what it takes. An empty value is no filter. Pure: no database, no request.
 */
final class JobFilter
{
    /** The longest value a text filter takes. */
    public const MAX_TEXT = 200;

    /** Every filter, in the order the page shows them, with what it matches. */
    public const FILTERS = [
        'queue' => 'the queue, exactly',
        'class' => "the job's class: its full name, or the name after the last backslash",
        'tag' => 'a tag, exactly',
        'group' => 'the ordered group, exactly',
        'limit' => 'a limit key the job waits for or holds',
        'batch' => 'the id of the batch (a uuid)',
        'host' => 'the host the job ran or runs on',
        'attempts' => 'at least this many attempts',
        'exception' => 'text in the exception (case-insensitive)',
        'text' => 'text anywhere in the payload (case-sensitive)',
        'since' => 'dispatched, finished or failed at or after (YYYY-MM-DD HH:MM, the application time zone)',
        'until' => 'dispatched, finished or failed before',
    ];

    /**
     * @param array<string, string> $values the filters set, by name, as given
     * @param array<string, \DateTimeImmutable> $times since / until, read
     */
    private function __construct(
        public readonly State $state,
        public readonly array $values,
        public readonly array $times,
    ) {
    }

    /**
     * The search a query asks for, or the problems with it (each naming its parameter).
     *
     * @param array<string, mixed> $query
     * @return array{0: ?self, 1: list<string>}
     */
    public static function fromQuery(array $query, ?\DateTimeZone $zone = null): array
    {
        $problems = [];
        $stateName = $query['state'] ?? 'pending';
        $state = is_string($stateName) ? State::tryFrom($stateName) : null;
        if ($state === null) {
            $names = implode(', ', array_map(fn (State $s) => $s->value, State::cases()));
            return [null, ['state must be one of ' . $names]];
        }
        $values = [];
        $times = [];
        foreach (array_keys(self::FILTERS) as $name) {
            $raw = $query[$name] ?? null;
            if ($raw === null || (is_string($raw) && trim($raw) === '')) {
                continue;
            }
            if (!is_string($raw)) {
                $problems[] = "$name must be one value";
                continue;
            }
            $value = trim($raw);
            if (!in_array($name, $state->filters(), true)) {
                $problems[] = "$name does not apply to {$state->value} jobs (it applies to " . self::statesOf($name) . ')';
                continue;
            }
            if (mb_strlen($value) > self::MAX_TEXT) {
                $problems[] = "$name is longer than " . self::MAX_TEXT . ' characters';
                continue;
            }
            $problem = self::problem($name, $value);
            if ($problem !== null) {
                $problems[] = $problem;
                continue;
            }
            if ($name === 'since' || $name === 'until') {
                $time = self::time($value, $zone ?? new \DateTimeZone(date_default_timezone_get()));
                if ($time === null) {
                    $problems[] = "$name must be a time such as 2026-12-07 14:30 (or 2026-12-07), not " . self::quoted($value);
                    continue;
                }
                $times[$name] = $time;
            }
            $values[$name] = $value;
        }
        if (isset($times['since'], $times['until']) && $times['since'] >= $times['until']) {
            $problems[] = 'since must be before until';
        }
        return $problems === [] ? [new self($state, $values, $times), []] : [null, $problems];
    }

    /** What is wrong with a filter's value, or null. */
    private static function problem(string $name, string $value): ?string
    {
        return match ($name) {
            'attempts' => preg_match('/^[0-9]{1,6}$/', $value) === 1 ? null : 'attempts must be a whole number from 0 to 999999, not ' . self::quoted($value),
            'batch' => preg_match('/^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/', $value) === 1 ? null : 'batch must be a batch id (a uuid such as 9a4c…-…), not ' . self::quoted($value),
            'class' => preg_match('/^\\\\?[A-Za-z_\x80-\xff][A-Za-z0-9_\x80-\xff]*(\\\\[A-Za-z_\x80-\xff][A-Za-z0-9_\x80-\xff]*)*$/', $value) === 1 ? null : 'class must be a PHP class name such as App\\Jobs\\SendInvoice or SendInvoice, not ' . self::quoted($value),
            default => null,
        };
    }

    private static function time(string $value, \DateTimeZone $zone): ?\DateTimeImmutable
    {
        foreach (['!Y-m-d H:i:s', '!Y-m-d H:i', '!Y-m-d\TH:i:s', '!Y-m-d\TH:i', '!Y-m-d'] as $format) {
            $time = \DateTimeImmutable::createFromFormat($format, $value, $zone);
            $errors = \DateTimeImmutable::getLastErrors();
            if ($time !== false && ($errors === false || ($errors['warning_count'] === 0 && $errors['error_count'] === 0))) {
                return $time;
            }
        }
        return null;
    }

    /** The states a filter applies to, for a message. */
    private static function statesOf(string $name): string
    {
        $states = array_filter(State::cases(), fn (State $s) => in_array($name, $s->filters(), true));
        return implode(', ', array_map(fn (State $s) => $s->value, $states));
    }

    private static function quoted(string $value): string
    {
        return '“' . mb_substr($value, 0, 40) . (mb_strlen($value) > 40 ? '…' : '') . '”';
    }

    public function has(string $name): bool
    {
        return isset($this->values[$name]);
    }

    public function get(string $name): ?string
    {
        return $this->values[$name] ?? null;
    }

    /** The class filter without a leading backslash. */
    public function className(): ?string
    {
        $class = $this->get('class');
        return $class === null ? null : ltrim($class, '\\');
    }

    /**
     * The search as a query string's parameters: the state and every filter set, so that the
     * same search can be linked, shared and stored with an action.
     *
     * @return array<string, string>
     */
    public function query(): array
    {
        return ['state' => $this->state->value] + $this->values;
    }

    /**
     * The search as the audit trail keeps it: its free-text filters (text, exception) replaced
     * by Redaction::WITHHELD.
     */
    public function audited(): self
    {
        return new self($this->state, \Drover\Dashboard\Redaction::search($this->values), $this->times);
    }

    /** The search in words, for a confirmation and the audit trail. */
    public function describe(): string
    {
        $parts = [];
        foreach ($this->values as $name => $value) {
            $parts[] = "$name “{$value}”";
        }
        return $this->state->label() . ' jobs' . ($parts === [] ? '' : ' with ' . implode(', ', $parts));
    }
}
