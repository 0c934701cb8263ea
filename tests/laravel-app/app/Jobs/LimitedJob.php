<?php

namespace App\Jobs;

use App\Support\Journal;
use Drover\Middleware\LimitConcurrency;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\Middleware\WithoutOverlapping;
use Illuminate\Queue\SerializesModels;

/**
 * A job under a concurrency limit (tests/limits.rs): journals `limit_start` and `limit_end`
 * around `$millis` ms of work, labelled `<key>:<seq>`, so the test can count how many of a key
 * ran at once and on which attempt each started. `$max` 0 puts it under Laravel's
 * `WithoutOverlapping($key)` (released for 1 s when its key is taken, as `queue:work` does it),
 * any other under drover's `LimitConcurrency($key, $max)`. Tried up to 50 times, so that under
 * `queue:work` the releases use attempts without failing the job.
 */
class LimitedJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels;

    public $tries = 50;

    public function __construct(public string $key, public string $label, public int $max = 0, public int $millis = 150)
    {
    }

    public function middleware(): array
    {
        return [$this->max === 0
            ? (new WithoutOverlapping($this->key))->releaseAfter(1)
            : new LimitConcurrency($this->key, $this->max)];
    }

    public function handle(): void
    {
        Journal::record($this->label, 'limit_start', $this->attempts());
        usleep($this->millis * 1000);
        Journal::record($this->label, 'limit_end', $this->attempts());
    }
}
