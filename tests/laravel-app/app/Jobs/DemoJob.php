<?php

namespace App\Jobs;

use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Support\Facades\DB;

/** The demo's job: busy-wait $ms on a monotonic clock, then record the completion. */
class DemoJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable;

    public $tries = 3;

    public function __construct(public int $seq, public int $ms = 10)
    {
    }

    public function handle(): void
    {
        $until = hrtime(true) + $this->ms * 1_000_000;
        while (hrtime(true) < $until) {
            // busy, like real work
        }
        DB::insert('INSERT INTO demo_runs (seq, attempt, pid) VALUES (?, ?, ?)', [$this->seq, $this->attempts(), getmypid()]);
    }
}
