<?php

namespace App\Console\Commands;

use App\Jobs\BenchJob;
use Illuminate\Console\Command;
use Illuminate\Support\Facades\DB;
use Illuminate\Support\Facades\Queue;

/**
 * Dispatches the benchmark's jobs to a queue connection: one at a time (each its own commit, as
 * web requests do), optionally paced to --rate per second or in --burst groups of N every
 * --burst-every seconds, or --bulk. Records when each dispatch
 * returned (its commit) and how long it took (from push() called to returned) in bench_dispatch;
 * prints this process's CPU time per dispatch over the dispatch loop (user + system, from
 * getrusage: Laravel's boot left out), then the time of the first dispatch.
 */
class DispatchBench extends Command
{
    protected $signature = 'bench:dispatch {connection} {count} {ms=0} {--rate=0 : jobs per second, 0 = as fast as possible} {--bulk : one bulk insert per 1000 jobs} {--burst=0 : dispatch in bursts of this many, one at a time} {--burst-every=1.5 : seconds from the start of one burst to the next}';

    protected $description = 'Dispatch benchmark jobs (bench/)';

    public function handle(): int
    {
        $connection = $this->argument('connection');
        $count = (int) $this->argument('count');
        $ms = (int) $this->argument('ms');
        $queue = Queue::connection($connection);
        $committed = [];
        $cpuBefore = self::cpuSeconds();
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
                    $committed[] = [$job->seq, $now, null];
                }
            }
        } else {
            $interval = (float) $this->option('rate') > 0 ? 1 / (float) $this->option('rate') : 0.0;
            $burst = max(0, (int) $this->option('burst'));
            $every = (float) $this->option('burst-every');
            for ($seq = 1; $seq <= $count; $seq++) {
                $due = null;
                if ($burst > 0) {
                    $due = $first + intdiv($seq - 1, $burst) * $every;
                } elseif ($interval > 0) {
                    $due = $first + ($seq - 1) * $interval;
                }
                if ($due !== null) {
                    $wait = $due - microtime(true);
                    if ($wait > 0) {
                        usleep((int) ($wait * 1e6));
                    }
                }
                $called = microtime(true);
                $queue->push(new BenchJob($seq, $ms));
                $returned = microtime(true);
                $committed[] = [$seq, $returned, $returned - $called];
            }
        }
        $cpu = self::cpuSeconds() - $cpuBefore;
        foreach (array_chunk($committed, 5000) as $chunk) {
            $values = implode(',', array_fill(0, count($chunk), '(?, ?, ?)'));
            DB::insert("INSERT INTO bench_dispatch (seq, committed_at, took) VALUES $values", array_merge(...$chunk));
        }
        $this->line(sprintf('cpu_per_dispatch_us=%.3f', $count > 0 ? $cpu / $count * 1e6 : 0.0));
        $this->line(sprintf('%.6f', $first));
        return 0;
    }

    private static function cpuSeconds(): float
    {
        $u = getrusage();
        return $u['ru_utime.tv_sec'] + $u['ru_utime.tv_usec'] / 1e6 + $u['ru_stime.tv_sec'] + $u['ru_stime.tv_usec'] / 1e6;
    }
}
