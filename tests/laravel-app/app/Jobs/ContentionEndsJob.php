<?php

namespace App\Jobs;

use App\Support\Journal;
use App\Support\Waits;
use Illuminate\Support\Facades\Cache;
use Illuminate\Support\Facades\RateLimiter;

/**
 * Ends a contention once the job it holds back was released: waits (up to 10 s) until the job
 * labelled `$waiter` journaled `processed` on its first attempt, then frees what held it — the
 * WithoutOverlapping lock `$key` (`overlap`, as the job holding it would on finishing) or the
 * rate limiter's count `$key` (`rate_limit`, as the end of its window would). Dispatched after
 * the waiter on the same queue, so the waiter is always taken first: this job never waits for a
 * free worker, only for the waiter's first attempt.
 */
class ContentionEndsJob extends MatrixJob
{
    public function __construct(string $label, public string $waiter, public string $what, public string $key)
    {
        parent::__construct($label);
    }

    protected function run(int $attempt): void
    {
        $released = Waits::forJournal($this->waiter, 'processed');
        match ($this->what) {
            'overlap' => Cache::lock($this->key)->forceRelease(),
            'rate_limit' => RateLimiter::clear($this->key),
        };
        Journal::record($this->label, $released ? 'saw_the_waiter_released' : 'waiter_never_released', $attempt);
    }
}
