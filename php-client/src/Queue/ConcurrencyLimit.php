<?php

namespace Drover\Queue;

use Drover\Middleware\LimitConcurrency;

/**
 * The concurrency limit a job is enqueued under (docs/limits.md): a key and how many jobs of it
 * may be out at once. Read at dispatch from the job's middleware — Laravel's
 * `WithoutOverlapping` in its releasing form is a limit of 1 under Laravel's lock key, drover's
 * `LimitConcurrency` names its own (LaravelLimits reads both) — and written into the payload,
 * so that a retry (`queue:retry` pushes the payload raw) keeps it.
 *
 * One per job for now: a job naming two (an overlap key and a concurrency key, or two of either)
 * is refused at dispatch, naming them, rather than enforced on one and not the other. A grouped
 * job cannot carry one yet either.
 */
final class ConcurrencyLimit
{
    /** The payload key a limited job carries. */
    public const PAYLOAD_KEY = 'droverConcurrency';

    private function __construct(
        /** The key its slots are counted under, across every queue. */
        public readonly string $key,
        /** How many jobs of the key may be out at once (the latest dispatch's applies). */
        public readonly int $max,
    ) {
    }

    /** The job's limit, or null when its middleware names none. */
    public static function ofJob(mixed $job): ?self
    {
        if (!is_object($job)) {
            return null;
        }
        $slots = array_values(array_filter(
            LaravelLimits::ofJob($job)->limits,
            fn (array $limit) => $limit['kind'] === 'slots',
        ));
        if ($slots === []) {
            return null;
        }
        if (count($slots) > 1) {
            $named = implode(', ', array_map(fn (array $l) => self::shortName($l['from']) . " '{$l['key']}' ({$l['cap']})", $slots));
            throw new \InvalidArgumentException('drover: ' . get_class($job) . " names more than one concurrency limit: $named; drover enforces one per job for now, keep one");
        }
        return self::checked($slots[0]['key'], $slots[0]['cap'], get_class($job));
    }

    /** The limit a payload carries (a retried or raw job), or null. */
    public static function ofPayload(string $payload): ?self
    {
        if (!str_contains($payload, '"' . self::PAYLOAD_KEY . '"')) {
            return null;
        }
        $decoded = json_decode($payload, true);
        $limit = is_array($decoded) ? ($decoded[self::PAYLOAD_KEY] ?? null) : null;
        $name = is_array($decoded) && is_string($decoded['displayName'] ?? null) ? $decoded['displayName'] : 'a raw payload';
        if (!is_array($limit) || !is_string($limit['key'] ?? null) || !is_int($limit['max'] ?? null)) {
            throw new \InvalidArgumentException("drover: the " . self::PAYLOAD_KEY . " of $name is not {\"key\": string, \"max\": int}; dispatch the job again rather than edit its payload");
        }
        return self::checked($limit['key'], $limit['max'], $name);
    }

    /** Writes the limit into a payload array. */
    public function into(array $payload): array
    {
        $payload[self::PAYLOAD_KEY] = ['key' => $this->key, 'max' => $this->max];
        return $payload;
    }

    private static function checked(string $key, int $max, string $job): self
    {
        if ($key === '' || mb_strlen($key) > LimitConcurrency::MAX_KEY_LENGTH) {
            throw new \InvalidArgumentException("drover: the concurrency key of $job is " . mb_strlen($key) . ' characters long; give 1 to ' . LimitConcurrency::MAX_KEY_LENGTH);
        }
        if ($max < 1) {
            throw new \InvalidArgumentException("drover: the concurrency limit of $job allows $max jobs at once; give at least 1");
        }
        return new self($key, $max);
    }

    private static function shortName(string $class): string
    {
        $at = strrpos($class, '\\');
        return $at === false ? $class : substr($class, $at + 1);
    }
}
