<?php

namespace Drover\Queue;

use Drover\Middleware\LimitConcurrency;
use Drover\Middleware\LimitRate;
use Illuminate\Cache\RateLimiting\Limit;
use Illuminate\Cache\RateLimiting\Unlimited;
use Illuminate\Queue\Middleware\RateLimited;
use Illuminate\Queue\Middleware\WithoutOverlapping;

/**
 * The limits a job's Laravel middleware puts on its start, read from the job object at dispatch
 * as `Illuminate\Queue\CallQueuedHandler` gathers the middleware at run time (the `middleware()`
 * method, then the `$middleware` property that `through()` fills), for the broker to enforce
 * before the job is leased (docs/limits.md; JobLimits writes them into the job).
 *
 * - `WithoutOverlapping` in its releasing form: a slot of one under `getLockKey($job)`, the key
 *   Laravel's lock takes.
 * - drover's own `LimitConcurrency` (`max` slots under its key) and `LimitRate` (`max` starts
 *   per window under its key).
 * - `RateLimited` with `shouldRelease`: each `Limit` its limiter answers for the job, under
 *   `md5(limiter . key)` as Laravel keys its counter, with the limit's decay in seconds (Laravel 8
 *   counts it in minutes).
 *
 * Left to Laravel, each with the reason ({@see self::$leftToLaravel}): `dontRelease()` (the job
 * is to be dropped, not delayed), a subclass that changes how the check is made (such as
 * `RateLimitedWithRedis`), a limiter answer that is not a list of `Limit`s. A limiter not defined
 * (`RateLimiter::for`), `Limit::none()` and an empty answer limit nothing, as in Laravel.
 */
final class LaravelLimits
{
    /**
     * @param list<array{kind: 'slots'|'rate', key: string, cap: int, window_secs: int, from: class-string}> $limits
     *        what the broker enforces: `slots` (at most `cap` of the key at once; `window_secs`
     *        0) or `rate` (at most `cap` starts per `window_secs`)
     * @param list<string> $leftToLaravel the middleware drover leaves as Laravel runs it, and why
     */
    private function __construct(
        public readonly array $limits,
        public readonly array $leftToLaravel,
    ) {
    }

    public static function ofJob(mixed $job): self
    {
        if (!is_object($job)) {
            return new self([], []);
        }
        return self::ofMiddleware($job, self::middlewareOf($job));
    }

    /**
     * The limits of `$middleware` as if `$job` carried it.
     *
     * @param list<mixed> $middleware
     */
    public static function ofMiddleware(object $job, array $middleware): self
    {
        $limits = [];
        $left = [];
        foreach ($middleware as $one) {
            if ($one instanceof WithoutOverlapping) {
                self::overlap($job, $one, $limits, $left);
            } elseif ($one instanceof RateLimited) {
                self::rate($job, $one, $limits, $left);
            } elseif ($one instanceof LimitConcurrency) {
                $limits[] = [
                    'kind' => 'slots',
                    'key' => $one->key,
                    'cap' => $one->max,
                    'window_secs' => 0,
                    'from' => LimitConcurrency::class,
                ];
            } elseif ($one instanceof LimitRate) {
                $limits[] = [
                    'kind' => 'rate',
                    'key' => $one->key,
                    'cap' => $one->max,
                    'window_secs' => $one->seconds,
                    'from' => LimitRate::class,
                ];
            }
        }
        return new self($limits, $left);
    }

    /**
     * The job's middleware as `CallQueuedHandler::dispatchThroughMiddleware` gathers it.
     *
     * @return list<mixed>
     */
    public static function middlewareOf(object $job): array
    {
        $fromMethod = method_exists($job, 'middleware') ? $job->middleware() : [];
        $fromProperty = property_exists($job, 'middleware') && is_array($job->middleware) ? $job->middleware : [];
        return array_values(array_merge(is_array($fromMethod) ? $fromMethod : [], $fromProperty));
    }

    /**
     * @param list<array<string, mixed>> $limits
     * @param list<string> $left
     */
    private static function overlap(object $job, WithoutOverlapping $middleware, array &$limits, array &$left): void
    {
        if (!self::declaredByLaravel($middleware, WithoutOverlapping::class, ['handle', 'getLockKey'])) {
            $left[] = get_class($middleware) . ': a subclass that changes how the lock is taken';
            return;
        }
        if ($middleware->releaseAfter === null) {
            $left[] = WithoutOverlapping::class . ': dontRelease() drops the job rather than delaying it';
            return;
        }
        $limits[] = [
            'kind' => 'slots',
            'key' => self::slotKey((string) $middleware->getLockKey($job)),
            'cap' => 1,
            'window_secs' => 0,
            'from' => WithoutOverlapping::class,
        ];
    }

    /**
     * @param list<array<string, mixed>> $limits
     * @param list<string> $left
     */
    private static function rate(object $job, RateLimited $middleware, array &$limits, array &$left): void
    {
        if (!self::declaredByLaravel($middleware, RateLimited::class, ['handle', 'handleJob'])) {
            $left[] = get_class($middleware) . ': a subclass that changes how the limit is counted';
            return;
        }
        if (!$middleware->shouldRelease) {
            $left[] = RateLimited::class . ': dontRelease() drops the job rather than delaying it';
            return;
        }
        $name = (string) self::protectedProperty($middleware, 'limiterName');
        $limiter = self::protectedProperty($middleware, 'limiter');
        $callback = is_object($limiter) ? $limiter->limiter($name) : null;
        if ($callback === null) {
            return;
        }
        $answer = $callback($job);
        if ($answer instanceof Unlimited) {
            return;
        }
        $answer = $answer === null ? [] : (is_array($answer) ? $answer : [$answer]);
        $found = [];
        foreach ($answer as $limit) {
            if (!$limit instanceof Limit) {
                $left[] = RateLimited::class . " $name: the limiter answers something other than Limit objects";
                return;
            }
            $found[] = [
                'kind' => 'rate',
                'key' => md5($name . $limit->key),
                'cap' => (int) $limit->maxAttempts,
                'window_secs' => self::windowSeconds($limit),
                'from' => RateLimited::class,
            ];
        }
        array_push($limits, ...$found);
    }

    /**
     * The broker's key for a lock key: the lock key itself, or its digest when it is longer than
     * the broker's keys may be (a long `WithoutOverlapping` key works on `queue:work`, so it must
     * here too; two lock keys share a digest only as they share a lock).
     */
    private static function slotKey(string $lockKey): string
    {
        return mb_strlen($lockKey) <= LimitConcurrency::MAX_KEY_LENGTH ? $lockKey : 'sha256:' . hash('sha256', $lockKey);
    }

    /** A limit's decay in seconds: Laravel 12 keeps seconds, Laravel 8 minutes. */
    private static function windowSeconds(Limit $limit): int
    {
        return property_exists($limit, 'decaySeconds')
            ? (int) $limit->decaySeconds
            : (int) $limit->decayMinutes * 60;
    }

    /**
     * Whether each of `$methods` of `$middleware` is the one Laravel's `$class` declares.
     *
     * @param list<string> $methods
     */
    private static function declaredByLaravel(object $middleware, string $class, array $methods): bool
    {
        foreach ($methods as $method) {
            if ((new \ReflectionMethod($middleware, $method))->getDeclaringClass()->getName() !== $class) {
                return false;
            }
        }
        return true;
    }

    private static function protectedProperty(object $object, string $name): mixed
    {
        $property = new \ReflectionProperty($object, $name);
        $property->setAccessible(true);
        return $property->getValue($object);
    }
}
