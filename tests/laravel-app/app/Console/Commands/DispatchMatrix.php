<?php

namespace App\Console\Commands;

use App\Jobs;
use App\Models\Widget;
use Illuminate\Console\Command;
use Illuminate\Support\Facades\Bus;

/**
 * Dispatches the behaviour matrix — one job per Laravel queue feature — to a queue connection.
 * Labels starting with "multi_" name several jobs whose runs are compared as a set.
 */
class DispatchMatrix extends Command
{
    protected $signature = 'matrix:dispatch {connection : database or drover}';

    protected $description = 'Dispatch the job behaviour matrix';

    public function handle(): int
    {
        config(['queue.default' => $this->argument('connection')]);

        Jobs\OkJob::dispatch('ok');
        Jobs\FlakyJob::dispatch('flaky');
        Jobs\FailingJob::dispatch('failing');
        Jobs\ReleasingJob::dispatch('releasing');
        Jobs\DeletingJob::dispatch('deleting');
        Jobs\ManualFailJob::dispatch('manual_fail');
        Jobs\MaxExceptionsJob::dispatch('max_exceptions');
        Jobs\RetryUntilPastJob::dispatch('retry_until_past');
        Jobs\RetryUntilFutureJob::dispatch('retry_until_future');
        Jobs\TimeoutFailJob::dispatch('timeout_fail');
        Jobs\TimeoutRetryJob::dispatch('timeout_retry');
        Jobs\EncryptedJob::dispatch('encrypted');
        Jobs\OverlapJob::dispatch('overlap');
        Jobs\ThrottledJob::dispatch('throttled');
        Jobs\OkJob::dispatch('delayed')->delay(1);
        // No $backoff: on Laravel 12 the retry waits for the payload's delay (Job::backoff()).
        Jobs\DelayedFlakyJob::dispatch('delayed_flaky')->delay(2);

        $widget = Widget::create(['name' => 'gone before the job runs']);
        Jobs\MissingModelJob::dispatch('missing_model', $widget);
        $widget->delete();

        // A second dispatch of a unique job is dropped while the first holds the lock.
        Jobs\UniqueJob::dispatch('multi_unique');
        Jobs\UniqueJob::dispatch('multi_unique');
        // Chained jobs are dispatched by the worker that ran the previous link: name the connection.
        $connection = $this->argument('connection');
        Bus::chain([new Jobs\OkJob('chain_1'), new Jobs\OkJob('chain_2'), new Jobs\OkJob('chain_3')])->onConnection($connection)->dispatch();
        // Two rate-limited jobs, the second dispatched when the first completes (a chain): the
        // limiter is not atomic across concurrent workers, under queue:work as under drover.
        Bus::chain([new Jobs\RateLimitedJob('multi_rate_limited'), new Jobs\RateLimitedJob('multi_rate_limited')])->onConnection($connection)->dispatch();
        Bus::batch([new Jobs\BatchedJob('batch_1'), new Jobs\BatchedJob('batch_2')])->name('matrix')->onConnection($connection)->dispatch();

        $this->info('matrix dispatched to ' . $this->argument('connection'));
        return 0;
    }
}
