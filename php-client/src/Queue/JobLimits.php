<?php

namespace Drover\Queue;

use Drover\Middleware\LimitConcurrency;
use Drover\Middleware\LimitRate;

/**
 * The limits a job is enqueued under (docs/limits.md): per limit a key, a cap and a window in
 * milliseconds (0: a concurrency limit of `cap` at once; more: a rate of `cap` starts per window).
 * A rate from Laravel's `RateLimited` gets a window a little longer than its limiter's
 * ({@see self::laravelMargin()}): the middleware still runs when the job starts and opens its own
 * window at its first hit, after drover admitted the job; the margin keeps it from seeing more
 * than its limit in that window. drover's own `LimitRate` gets its window exactly.
 * Read at dispatch from the job's middleware (LaravelLimits: Laravel's releasing
 * `WithoutOverlapping` and `RateLimited`, drover's `LimitConcurrency` and `LimitRate`) and
 * written into the payload, so that a retry (`queue:retry` pushes the payload raw) keeps them.
 *
 * A rate's key carries its window (`key@60s`): two rates of one key with different windows
 * (`perMinute` and `perHour`) are two limits. The same key named twice as the same kind keeps the
 * stricter. A job takes at most 8 limits; a grouped job none yet (its group already runs one job
 * at a time); both are refused at dispatch, naming the job.
 */
final class JobLimits
{
    /** The payload key a limited job carries. */
    public const PAYLOAD_KEY = 'droverLimits';

    /** The most limits one job takes (the broker's own bound). */
    public const MAX_LIMITS = 8;

    /**
     * @param list<array{0: string, 1: int, 2: int}> $limits (key, cap, window milliseconds), in the
     *        order read; the broker takes them in its own order
     */
    private function __construct(public readonly array $limits)
    {
    }

    /** The job's limits, or null when its middleware names none. */
    public static function ofJob(mixed $job): ?self
    {
        if (!is_object($job)) {
            return null;
        }
        return self::found(LaravelLimits::ofJob($job)->limits, get_class($job));
    }

    /**
     * The limits of drover's own middleware given without a job (Drover\Producer), `$name`
     * naming the caller in messages; null when there are none.
     *
     * @param list<mixed> $middleware
     */
    public static function ofMiddleware(array $middleware, string $name): ?self
    {
        return self::found(LaravelLimits::ofMiddleware(new \stdClass(), $middleware)->limits, $name);
    }

    /**
     * @param list<array{kind: string, key: string, cap: int, window_secs: int, from: string}> $found
     */
    private static function found(array $found, string $job): ?self
    {
        if ($found === []) {
            return null;
        }
        $limits = [];
        foreach ($found as $l) {
            $seconds = $l['kind'] === 'rate' ? (int) $l['window_secs'] : 0;
            if ($l['kind'] === 'rate' && $seconds < 1) {
                throw new \InvalidArgumentException("drover: $job has a rate limit ('{$l['key']}', from " . self::shortName($l['from']) . ") with a window of $seconds seconds; give at least 1");
            }
            if ($l['kind'] !== 'rate') {
                $limits[] = [$l['key'], (int) $l['cap'], 0];
                continue;
            }
            $ms = $seconds * 1000 + ($l['from'] === LimitRate::class ? 0 : self::laravelMargin($seconds));
            $limits[] = [self::rateKey($l['key'], $seconds), (int) $l['cap'], $ms];
        }
        return self::checked($limits, $job);
    }

    /** The limits a payload carries (a retried or raw job), or null. */
    public static function ofPayload(string $payload): ?self
    {
        if (!str_contains($payload, '"' . self::PAYLOAD_KEY . '"')) {
            return null;
        }
        $decoded = json_decode($payload, true);
        $name = is_array($decoded) && is_string($decoded['displayName'] ?? null) ? $decoded['displayName'] : 'a raw payload';
        $limits = is_array($decoded) ? ($decoded[self::PAYLOAD_KEY] ?? null) : null;
        $valid = is_array($limits) && array_is_list($limits) && $limits !== [];
        foreach ($valid ? $limits : [] as $l) {
            $valid = $valid && is_array($l) && array_is_list($l) && count($l) === 3
                && is_string($l[0]) && is_int($l[1]) && is_int($l[2]);
        }
        if (!$valid) {
            throw new \InvalidArgumentException('drover: the ' . self::PAYLOAD_KEY . " of $name is not a list of [key, cap, window milliseconds]; dispatch the job again rather than edit its payload");
        }
        return self::checked($limits, $name);
    }

    /** Writes the limits into a payload array. */
    public function into(array $payload): array
    {
        $payload[self::PAYLOAD_KEY] = $this->limits;
        return $payload;
    }

    /** The keys, caps and windows as PostgreSQL array literals, for drover.enqueue_limited. */
    public function bindings(): array
    {
        $text = fn (string $s) => '"' . addcslashes($s, '"\\') . '"';
        return [
            '{' . implode(',', array_map(fn ($l) => $text($l[0]), $this->limits)) . '}',
            '{' . implode(',', array_column($this->limits, 1)) . '}',
            '{' . implode(',', array_column($this->limits, 2)) . '}',
        ];
    }

    /**
     * @param list<array{0: string, 1: int, 2: int}> $limits
     */
    private static function checked(array $limits, string $job): self
    {
        $kept = [];
        foreach ($limits as [$key, $cap, $window]) {
            if ($key === '' || mb_strlen($key) > LimitConcurrency::MAX_KEY_LENGTH) {
                throw new \InvalidArgumentException("drover: a limit key of $job is " . mb_strlen($key) . ' characters long; give 1 to ' . LimitConcurrency::MAX_KEY_LENGTH);
            }
            if ($cap < 1) {
                $what = $window === 0 ? 'concurrency limit' : 'rate limit';
                throw new \InvalidArgumentException("drover: the $what '$key' of $job allows $cap jobs; give at least 1");
            }
            if ($window < 0) {
                throw new \InvalidArgumentException("drover: the limit '$key' of $job has a window of $window ms; give 0 (concurrency) or more");
            }
            $id = ($window > 0 ? 'rate ' : 'concurrency ') . $key;
            if (!isset($kept[$id]) || $cap < $kept[$id][1]) {
                $kept[$id] = [$key, $cap, $window];
            }
        }
        if (count($kept) > self::MAX_LIMITS) {
            throw new \InvalidArgumentException("drover: $job names " . count($kept) . ' limits; a job takes at most ' . self::MAX_LIMITS);
        }
        return new self(array_values($kept));
    }

    /**
     * The milliseconds added to the window of a rate from Laravel's `RateLimited`: a twentieth of
     * the window, at least 250 ms (the time from an admission to the job's start, with room) and
     * at most a second.
     */
    public static function laravelMargin(int $seconds): int
    {
        return max(250, min(1000, intdiv($seconds * 1000, 20)));
    }

    /**
     * A rate's key with its window, or its digest when that is longer than a key may be (two
     * keys share a digest only as they share a limit).
     */
    private static function rateKey(string $key, int $window): string
    {
        $keyed = "$key@{$window}s";
        return mb_strlen($keyed) <= LimitConcurrency::MAX_KEY_LENGTH ? $keyed : 'sha256:' . hash('sha256', $keyed);
    }

    private static function shortName(string $class): string
    {
        $at = strrpos($class, '\\');
        return $at === false ? $class : substr($class, $at + 1);
    }
}
