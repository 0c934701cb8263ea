<?php

namespace App\Jobs;

use App\Support\Journal;
use App\Support\Waits;

/**
 * Dispatched with a delay, no $backoff, throws on attempt 1. Laravel 12 writes the delay into the
 * payload and its Job::backoff() falls back to it, so the retry waits as long again; Laravel 8
 * writes no delay, so the retry is at once (the worker's --backoff=0). Attempt 2 journals which.
 */
class DelayedFlakyJob extends MatrixJob
{
    public $tries = 2;

    protected function run(int $attempt): void
    {
        $key = "matrix:{$this->label}:failed_at";
        if ($attempt === 1) {
            Waits::markFailure($key);
            throw new \RuntimeException('fails once, after its delay');
        }
        Journal::record($this->label, Waits::since($key) >= 1.5 ? 'retried_after_its_delay' : 'retried_at_once', $attempt);
    }
}
