<?php

namespace App\Jobs;

use App\Support\BenchRecords;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;

/**
 * The benchmark's job (bench/): busy-waits $ms on a monotonic clock, then records when handle()
 * started and ended (wall clock, microseconds). $tries = 1, as the benchmark demands.
 *
 * The record is one line appended to a file per worker process in $BENCH_RUNS_DIR
 * ("seq attempt pid started finished"): one write(2), no database round trip. An INSERT per job
 * cost every engine more than its own queue work (excimer: 40% of a drover worker's CPU on shape 2
 * went to the measurement's prepare/execute), hiding the differences the benchmark is there to show.
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
        BenchRecords::append(sprintf("%d %d %d %.6f %.6f\n", $this->seq, $this->attempts(), getmypid(), $started, microtime(true)));
    }
}
