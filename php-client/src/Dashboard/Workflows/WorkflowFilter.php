<?php

namespace Drover\Dashboard\Workflows;

/**
 * A search of the console's workflows (`/drover/workflows`): a name's prefix, a state and an age
 * (created within the last …), read from a request's query — every filter is in the URL, so a
 * search can be shared — and validated, each problem naming its parameter and what it takes. An
 * empty value is no filter. Pure: no database, no request.
 */
final class WorkflowFilter
{
    /** A workflow's states (drover.workflows.state, migration 0016), in the order the page offers them. */
    public const STATES = ['pending', 'running', 'completed', 'failed', 'cancelled'];

    /** The longest prefix a name filter takes (a workflow's name is at most 200 characters). */
    public const MAX_NAME = 200;

    /** The ages the page offers (any other `within` of the same form is taken too). */
    public const AGES = ['1h' => 'the last hour', '24h' => 'the last day', '7d' => 'the last 7 days', '30d' => 'the last 30 days'];

    /** Seconds per unit of `within`. */
    private const UNITS = ['m' => 60, 'h' => 3600, 'd' => 86400];

    private function __construct(
        /** Names starting with this, exactly (case-sensitive); null: any. */
        public readonly ?string $name,
        /** One of STATES; null: any. */
        public readonly ?string $state,
        /** As given (`7d`); null: any age. */
        public readonly ?string $within,
        /** `within` in seconds. */
        public readonly ?int $withinSecs,
    ) {
    }

    /** No filter: every workflow, newest first. */
    public static function all(): self
    {
        return new self(null, null, null, null);
    }

    /**
     * The search a query asks for, or the problems with it (each naming its parameter).
     *
     * @param array<string, mixed> $query
     * @return array{0: ?self, 1: list<string>}
     */
    public static function fromQuery(array $query): array
    {
        $problems = [];
        $value = function (string $name) use ($query, &$problems): ?string {
            $raw = $query[$name] ?? null;
            if ($raw === null || $raw === '') {
                return null;
            }
            if (!is_string($raw)) {
                $problems[] = "$name must be one value";
                return null;
            }
            return $raw;
        };
        // A prefix is taken as typed: spaces included, only an empty one is no filter.
        $name = $value('name');
        if ($name !== null && mb_strlen($name) > self::MAX_NAME) {
            $problems[] = 'name is longer than ' . self::MAX_NAME . ' characters (a workflow\'s name is at most 200)';
            $name = null;
        }
        $state = $value('state');
        $state = $state === null ? null : trim($state);
        if ($state !== null && $state !== '' && !in_array($state, self::STATES, true)) {
            $problems[] = 'state must be one of ' . implode(', ', self::STATES) . ', not ' . self::quoted($state);
        }
        $state = $state === '' ? null : $state;
        $within = $value('within');
        $within = $within === null ? null : trim($within);
        $secs = null;
        if ($within !== null && $within !== '') {
            $secs = self::seconds($within);
            if ($secs === null) {
                $problems[] = 'within must be a number and a unit — m, h or d, such as 30m, 24h or 7d (up to 3650d) — not ' . self::quoted($within);
            }
        }
        $within = $within === '' ? null : $within;
        return $problems === [] ? [new self($name, $state, $within, $secs), []] : [null, $problems];
    }

    /** `within` in seconds (`90m`, `24h`, `7d`), or null when it is not one. */
    public static function seconds(string $within): ?int
    {
        if (preg_match('/^([1-9][0-9]{0,5})([mhd])$/', $within, $m) !== 1) {
            return null;
        }
        $secs = (int) $m[1] * self::UNITS[$m[2]];
        return $secs <= 3650 * 86400 ? $secs : null;
    }

    /**
     * The name filter as a LIKE pattern: the prefix with LIKE's wildcards and its escape character
     * escaped (`\`, the default escape, so PostgreSQL still reads the pattern's fixed prefix and
     * scans workflows_name's range of it), then `%`. Null without a name filter.
     */
    public function likePattern(): ?string
    {
        return $this->name === null ? null : addcslashes($this->name, '\\%_') . '%';
    }

    /**
     * The search as a query string's parameters: every filter set, so that the same search can be
     * linked and shared.
     *
     * @return array<string, string>
     */
    public function query(): array
    {
        return array_filter(['name' => $this->name, 'state' => $this->state, 'within' => $this->within], fn ($v) => $v !== null);
    }

    /** Whether any filter is set. */
    public function any(): bool
    {
        return $this->query() !== [];
    }

    /** The search in words, for the page's heading. */
    public function describe(): string
    {
        $parts = [];
        if ($this->state !== null) {
            $parts[] = $this->state;
        }
        $words = ($parts === [] ? '' : implode(' ', $parts) . ' ') . 'workflows';
        if ($this->name !== null) {
            $words .= ' named “' . $this->name . '…”';
        }
        if ($this->within !== null) {
            $words .= ' created within ' . (self::AGES[$this->within] ?? 'the last ' . $this->within);
        }
        return ucfirst($words);
    }

    private static function quoted(string $value): string
    {
        return '“' . mb_substr($value, 0, 40) . (mb_strlen($value) > 40 ? '…' : '') . '”';
    }
}
