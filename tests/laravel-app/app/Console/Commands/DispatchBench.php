<?php

namespace App\Console\Commands;

use App\Jobs\BenchJob;
use Illuminate\Console\Command;
use Illuminate\Support\Facades\DB;
use Illuminate\Support\Facades\Queue;

/**
 * Dispatches the benchmark's jobs to a queue connection: one at a time (each its own commit, as
 * web requests do), optionally paced to --rate per second, or --bulk. Records when each dispatch
 * returned (its commit) in bench_dispatch; prints the time of the first dispatch.
 */
class DispatchBench extends Command
{
    protected $signature = 'bench:dispatch {connection} {count} {ms=0} {--rate=0 : jobs per second, 0 = as fast as possible} {--bulk : one bulk insert per 1000 jobs}';

    protected $description = 'Dispatch benchmark jobs (bench/)';

    public function handle(): int
    {
        $connection = $this->argument('connection');
        $count = (int) $this->argument('count');
        $ms = (int) $this->argument('ms');
        $queue = Queue::connection($connection);
        $committed = [];
        $first = microtime(true);
        if ($this->option('bulk')) {
            for ($from = 1; $from <= $count; $from += 1000) {
                $jobs = [];
                for ($seq = $from; $seq < min($from + 1000, $count + 1); $seq++) {
                    $jobs[] = new BenchJob($seq, $ms);
                }
                $queue->bulk($jobs);
                $now = microtime(true);
                foreach ($jobs as $job) {
                    $committed[] = [$job->seq, $now];
                }
            }
        } else {
            $interval = (float) $this->option('rate') > 0 ? 1 / (float) $this->option('rate') : 0.0;
            for ($seq = 1; $seq <= $count; $seq++) {
                if ($interval > 0) {
                    $due = $first + ($seq - 1) * $interval;
                    $wait = $due - microtime(true);
                    if ($wait > 0) {
                        usleep((int) ($wait * 1e6));
                    }
                }
                $queue->push(new BenchJob($seq, $ms));
                $committed[] = [$seq, microtime(true)];
            }
        }
        foreach (array_chunk($committed, 5000) as $chunk) {
            $values = implode(',', array_fill(0, count($chunk), '(?, ?)'));
            DB::insert("INSERT INTO bench_dispatch (seq, committed_at) VALUES $values", array_merge(...$chunk));
        }
        $this->line(sprintf('%.6f', $first));
        return 0;
    }
}
