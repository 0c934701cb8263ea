<?php

namespace Drover\Middleware;

/**
 * At most `$max` jobs under `$key` started per `$seconds`, across every worker, pool and master
 * on the database (Oban Pro's and Sidekiq Enterprise's rate limits; docs/limits.md). Returned
 * from a job's `middleware()` or given to `through()`:
 *
 *     public function middleware(): array
 *     {
 *         return [LimitRate::perSecond(5, "stripe:{$this->account}")];
 *     }
 *
 * The `drover` queue driver reads it at dispatch and the broker enforces it before the job is
 * leased: a job over the rate waits without a claim, a release or an attempt until the key's
 * next window opens. A window opens with its first job and lasts `$seconds`. At run time it
 * lets the job through; on another queue driver it limits nothing. For a limit a
 * Laravel application already defines with `RateLimiter::for`, use Laravel's `RateLimited`
 * middleware: drover enforces that too.
 */
final class LimitRate
{
    /** The longest window: a day, as Laravel's `Limit::perDay`. */
    public const MAX_SECONDS = 86_400;

    /** The key, as given: a string, an int or a backed enum. */
    public readonly string $key;

    public function __construct(mixed $key, public readonly int $max, public readonly int $seconds)
    {
        $this->key = LimitConcurrency::validKey($key, 'LimitRate');
        if ($max < 1) {
            throw new \InvalidArgumentException("drover: LimitRate of key '{$this->key}' allows $max jobs per window; give at least 1");
        }
        if ($seconds < 1 || $seconds > self::MAX_SECONDS) {
            throw new \InvalidArgumentException("drover: LimitRate of key '{$this->key}' has a window of $seconds seconds; give 1 to " . self::MAX_SECONDS);
        }
    }

    public static function perSecond(int $max, mixed $key): self
    {
        return new self($key, $max, 1);
    }

    public static function perMinute(int $max, mixed $key): self
    {
        return new self($key, $max, 60);
    }

    public static function perHour(int $max, mixed $key): self
    {
        return new self($key, $max, 3600);
    }

    public static function perDay(int $max, mixed $key): self
    {
        return new self($key, $max, 86_400);
    }

    /** Lets the job through: the broker enforced the rate before handing it out. */
    public function handle(mixed $job, callable $next): mixed
    {
        return $next($job);
    }
}
