<?php

namespace App\Jobs\Middleware;

/**
 * For Laravel 8, which has neither: Laravel 11's `Illuminate\Queue\Middleware\Skip` (the job is
 * not run when `$skip`, and counts as processed) and Laravel 9's `SkipIfBatchCancelled` (the same
 * when the job's batch is cancelled), line for line.
 */
class SkipStandIn
{
    public function __construct(protected bool $skip = false, protected bool $ifBatchCancelled = false)
    {
    }

    public function handle($job, $next)
    {
        if ($this->skip) {
            return false;
        }
        if ($this->ifBatchCancelled && method_exists($job, 'batch') && $job->batch()?->cancelled()) {
            return;
        }
        return $next($job);
    }
}
