<?php

namespace Drover\Middleware;

/**
 * At most `$max` jobs under `$key` running at once, across every worker, pool and master on the
 * database (Solid Queue's `limits_concurrency to: N, key:`; docs/limits.md). Returned from a
 * job's `middleware()` or given to `through()`, as Laravel's own job middleware is:
 *
 *     public function middleware(): array
 *     {
 *         return [new LimitConcurrency("tenant:{$this->tenant->id}", 2)];
 *     }
 *
 * The `drover` queue driver reads it at dispatch and the broker enforces it before the job is
 * leased: a job whose key is full waits without a claim, a release or an attempt, and is
 * handed out as soon as a job of its key leaves the queue for good (completed, deleted or
 * failed). A released job keeps its place among the `$max`. At run time it lets the job
 * through; on another queue driver it limits nothing. With `LimitRate` and Laravel's own
 * `WithoutOverlapping` and `RateLimited`, up to 8 limits combine on one job.
 */
final class LimitConcurrency
{
    /** The longest key (the broker's column allows as much). */
    public const MAX_KEY_LENGTH = 255;

    /** The key, as given: a string, an int or a backed enum. */
    public readonly string $key;

    /** How many jobs of the key may be out at once: at least 1. */
    public readonly int $max;

    public function __construct(mixed $key, int $max = 1)
    {
        $this->key = self::validKey($key, 'LimitConcurrency');
        if ($max < 1) {
            throw new \InvalidArgumentException("drover: LimitConcurrency of key '{$this->key}' allows $max jobs at once; give at least 1");
        }
        $this->max = $max;
    }

    /** Lets the job through: the broker enforced the limit before handing it out. */
    public function handle(mixed $job, callable $next): mixed
    {
        return $next($job);
    }

    /** A limit's key as drover keeps it, or why not (naming `$what`). */
    public static function validKey(mixed $key, string $what): string
    {
        if ($key instanceof \BackedEnum) {
            $key = $key->value;
        }
        if (is_int($key)) {
            $key = (string) $key;
        }
        if (!is_string($key)) {
            throw new \InvalidArgumentException("drover: the key of $what is a " . get_debug_type($key) . '; give a string, an int or a backed enum');
        }
        if ($key === '') {
            throw new \InvalidArgumentException("drover: the key of $what is empty; give a non-empty string");
        }
        if (mb_strlen($key) > self::MAX_KEY_LENGTH) {
            throw new \InvalidArgumentException("drover: the key of $what is " . mb_strlen($key) . ' characters long; at most ' . self::MAX_KEY_LENGTH . ' are allowed');
        }
        return $key;
    }
}
