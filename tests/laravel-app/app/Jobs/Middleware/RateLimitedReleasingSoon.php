<?php

namespace App\Jobs\Middleware;

use Illuminate\Queue\Middleware\RateLimited;

/**
 * Laravel's RateLimited, releasing a limited job for 2 s instead of until the limiter's window
 * ends (+3 s): Laravel 12's `releaseAfter(2)`, for Laravel 8, which has no releaseAfter().
 */
class RateLimitedReleasingSoon extends RateLimited
{
    protected function getTimeUntilNextRetry($key)
    {
        return 2;
    }
}
