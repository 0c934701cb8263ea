<?php

namespace Drover\Worker;

use Drover\Jobs\DroverJob;
use Drover\Queue\JobLimits;
use Drover\Queue\LaravelLimits;
use Illuminate\Contracts\Cache\Repository as Cache;
use Illuminate\Contracts\Container\Container;
use Illuminate\Contracts\Encryption\Encrypter;
use Illuminate\Queue\Middleware\WithoutOverlapping;

/**
 * The `WithoutOverlapping` locks a job's previous attempt left behind when the worker running it
 * died (SIGKILL, the OOM killer, a segfault): the lock is in the application's cache and no live
 * process holds it, and without `expireAfter` it never expires — under `queue:work` every later
 * attempt of every job of the key is released until it fails. drover knows the attempt died (the
 * master took the job back and says how in the job's frame) and that no other job of the key runs
 * (the key is one of the job's drover limits, a slot of 1), so before the job runs again its
 * worker forces that lock free. A lock of a key drover does not enforce (`dontRelease()`, a
 * subclass) is left as Laravel has it. docs/limits.md.
 */
final class StaleLocks
{
    /**
     * Forces free the overlap locks of `$job`'s keys if its previous attempt died; returns the
     * lock keys freed. A command that cannot be read (a model gone, an undecryptable payload) frees
     * nothing: Laravel reports it when it runs the job.
     *
     * @return list<string>
     */
    public static function releaseAfterDeath(DroverJob $job, Container $container): array
    {
        if ($job->previousDeath() === null) {
            return [];
        }
        $limits = JobLimits::ofPayload($job->getRawBody());
        if ($limits === null) {
            return [];
        }
        $enforced = array_column(array_filter($limits->limits, fn (array $l) => $l[2] === 0 && $l[1] === 1), 0);
        try {
            $command = self::command($job->payload(), $container);
        } catch (\Throwable) {
            return [];
        }
        if (!is_object($command)) {
            return [];
        }
        $freed = [];
        foreach (LaravelLimits::middlewareOf($command) as $middleware) {
            if (!$middleware instanceof WithoutOverlapping) {
                continue;
            }
            $key = (string) $middleware->getLockKey($command);
            $ours = LaravelLimits::ofMiddleware($command, [$middleware])->limits[0]['key'] ?? null;
            if ($ours !== null && in_array($ours, $enforced, true)) {
                $container->make(Cache::class)->lock($key)->forceRelease();
                $freed[] = $key;
            }
        }
        return $freed;
    }

    /** The job's command as Laravel's CallQueuedHandler reads it. */
    private static function command(array $payload, Container $container): mixed
    {
        $data = $payload['data']['command'] ?? null;
        if (!is_string($data)) {
            return null;
        }
        if (str_starts_with($data, 'O:')) {
            return unserialize($data);
        }
        return $container->bound(Encrypter::class) ? unserialize($container->make(Encrypter::class)->decrypt($data)) : null;
    }
}
