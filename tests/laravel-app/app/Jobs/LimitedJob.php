<?php

namespace App\Jobs;

use App\Support\Journal;
use Drover\Middleware\LimitConcurrency;
use Drover\Middleware\LimitRate;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\Middleware\RateLimited;
use Illuminate\Queue\Middleware\WithoutOverlapping;
use Illuminate\Queue\SerializesModels;

/**
 * A job under limits (tests/limits.rs): journals `limit_start` and `limit_end` around `$millis`
 * ms of work, labelled `<key>:<seq>`, so the test can count how many of a key ran at once, how
 * many started in a second, and on which attempt each started. Its middleware: drover's
 * `LimitConcurrency($key, $max)` for a `$max`, drover's `LimitRate` of `$perSecond` per
 * `$rateWindow` seconds (one by default) for a `$perSecond`, Laravel's `RateLimited($limiter)` for a `$limiter` (the fixture's
 * `tests_rate` is 3 per second by the job's key, 3 per minute on Laravel 8, which counts in
 * minutes); none of them: Laravel's `WithoutOverlapping($key)` (released for 1 s when its key is
 * taken, as `queue:work` does it). Tried up to 50 times, so that under `queue:work` the releases
 * use attempts without failing the job. A `$messageGroup` puts it in an ordered group as well.
 */
class LimitedJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels;

    public $tries = 50;

    /** An ordered group, when a test gives one (declared as Laravel 12's Queueable declares it). */
    public $messageGroup;

    public function __construct(
        public string $key,
        public string $label,
        public int $max = 0,
        public int $millis = 150,
        public int $perSecond = 0,
        public ?string $limiter = null,
        public int $rateWindow = 1,
    ) {
    }

    public function middleware(): array
    {
        if ($this->max === 0 && $this->perSecond === 0 && $this->limiter === null) {
            return [(new WithoutOverlapping($this->key))->releaseAfter(1)];
        }
        return array_values(array_filter([
            $this->max !== 0 ? new LimitConcurrency($this->key, $this->max) : null,
            $this->perSecond !== 0 ? new LimitRate($this->key, $this->perSecond, $this->rateWindow) : null,
            $this->limiter !== null ? new RateLimited($this->limiter) : null,
        ]));
    }

    public function handle(): void
    {
        Journal::record($this->label, 'limit_start', $this->attempts());
        usleep($this->millis * 1000);
        Journal::record($this->label, 'limit_end', $this->attempts());
    }
}
