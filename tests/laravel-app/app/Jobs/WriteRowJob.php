<?php

namespace App\Jobs;

use App\Support\BenchRecords;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Support\Facades\DB;

/**
 * The bench's job that writes one row (bench/src/exactly_once.rs, issue 59): one INSERT into
 * `bench_rows` on the application's default connection, nothing else (no journal, no sleep).
 * $tries = 1, as the benchmark demands.
 *
 * Its measurement is BenchJob's: one line appended to a file of its worker process in
 * $BENCH_RUNS_DIR ("seq attempt pid started finished"), one write(2), no database round trip.
 * The line is written once the row is committed (`DB::afterCommit`): at once for this class,
 * whose INSERT commits by itself; after the worker's COMMIT for WriteRowOnceJob, whose row commits
 * with the job's completion. So "finished" is when the row is durable, for every variant.
 */
class WriteRowJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable;

    public $tries = 1;

    public function __construct(public int $seq)
    {
    }

    public function handle(): void
    {
        $started = microtime(true);
        $this->write();
        $attempt = $this->attempts();
        DB::afterCommit(function () use ($started, $attempt): void {
            BenchRecords::append(sprintf("%d %d %d %.6f %.6f\n", $this->seq, $attempt, getmypid(), $started, microtime(true)));
        });
    }

    /** The job's one write. */
    protected function write(): void
    {
        DB::table('bench_rows')->insert(['seq' => $this->seq, 'pid' => getmypid()]);
    }
}
