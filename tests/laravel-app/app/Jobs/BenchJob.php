<?php

namespace App\Jobs;

use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Support\Facades\DB;

/**
 * The benchmark's job (bench/): busy-waits $ms on a monotonic clock, then records when handle()
 * started and ended (wall clock, microseconds) in bench_runs. $tries = 1, as the benchmark demands.
 */
class BenchJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable;

    public $tries = 1;

    public function __construct(public int $seq, public int $ms = 10)
    {
    }

    public function handle(): void
    {
        $started = microtime(true);
        if ($this->ms > 0) {
            $until = hrtime(true) + $this->ms * 1_000_000;
            while (hrtime(true) < $until) {
                // busy: the job uses its CPU time like real work would
            }
        }
        DB::insert(
            'INSERT INTO bench_runs (seq, attempt, pid, started_at, finished_at) VALUES (?, ?, ?, ?, ?)',
            [$this->seq, $this->attempts(), getmypid(), $started, microtime(true)]
        );
    }
}
