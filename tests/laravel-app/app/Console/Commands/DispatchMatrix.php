<?php

namespace App\Console\Commands;

use App\Jobs;
use App\Models\Widget;
use Illuminate\Console\Command;
use App\Support\Journal;
use Illuminate\Support\Facades\Bus;
use Illuminate\Support\Facades\Cache;
use Illuminate\Support\Facades\DB;

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
        // WithoutOverlapping under contention: the key is held (here, as by a job of that key
        // running elsewhere) when the waiter first runs, so it is released for 2 s; the lock
        // ends once it was (ContentionEndsJob), and it runs on attempt 2.
        $waiter = new Jobs\OverlapJob('overlap_waiter', 'overlap_contended');
        Cache::lock($waiter->lockKey())->get();
        dispatch($waiter)->onQueue('high');
        Jobs\ContentionEndsJob::dispatch('overlap_lock_ends', 'overlap_waiter', 'overlap', $waiter->lockKey())->onQueue('high');
        // RateLimited that releases: the first job runs, the one it dispatches is released for
        // 2 s, and runs once the limiter's window ended.
        Jobs\RateLimitedJob::dispatch('rate_limited_first', true, 'rate_limited_waiter')->onQueue('high');
        Jobs\SkipJob::dispatch('skip_when_true', true);
        Jobs\SkipJob::dispatch('skip_when_false', false);
        Journal::record('skip_when_true', Jobs\SkipJob::middlewareInUse(), 0);
        Jobs\ThrottledJob::dispatch('throttled');
        Jobs\OkJob::dispatch('delayed')->delay(1);
        // The cases that time their retries, on the queue both runners serve first: no $backoff
        // (on Laravel 12 the retry waits for the payload's delay, Job::backoff()), and a
        // $backoff of two steps.
        Jobs\DelayedFlakyJob::dispatch('delayed_flaky')->delay(2)->onQueue('high');
        Jobs\BackoffStepsJob::dispatch('backoff_steps')->onQueue('high');

        $widget = Widget::create(['name' => 'gone before the job runs']);
        Jobs\MissingModelJob::dispatch('missing_model', $widget);
        $widget->delete();

        // A second dispatch of a unique job is dropped while the first holds the lock; the first
        // dispatches a copy as it runs: dropped (ShouldBeUnique), queued (UntilProcessing, and
        // $uniqueFor once the lock expired).
        Jobs\UniqueJob::dispatch('multi_unique', true);
        Jobs\UniqueJob::dispatch('multi_unique');
        Jobs\UniqueUntilProcessingJob::dispatch('multi_unique_until_processing', true);
        Jobs\UniqueUntilProcessingJob::dispatch('multi_unique_until_processing');
        Jobs\UniqueForJob::dispatch('multi_unique_for', true);
        Jobs\UniqueForJob::dispatch('multi_unique_for');
        // Inside a transaction: queued at once, or held until the commit (afterCommit(),
        // ShouldQueueAfterCommit) — whether the queue has the job before the commit is journaled.
        DB::transaction(function () {
            Jobs\OkJob::dispatch('in_transaction');
            Jobs\OkJob::dispatch('after_commit')->afterCommit();
            Jobs\AfterCommitInterfaceJob::dispatch('after_commit_interface');
            foreach (['in_transaction', 'after_commit', 'after_commit_interface'] as $label) {
                Journal::record($label, $this->queued($label) ? 'queued_before_commit' : 'held_until_commit', 0);
            }
        });
        Journal::record('after_commit_interface', Jobs\AfterCommitInterfaceJob::HOW, 0);
        // Chained jobs are dispatched by the worker that ran the previous link: name the connection.
        $connection = $this->argument('connection');
        Bus::chain([new Jobs\OkJob('chain_1'), new Jobs\OkJob('chain_2'), new Jobs\OkJob('chain_3')])->onConnection($connection)->dispatch();
        // Two rate-limited jobs, the second dispatched when the first completes (a chain): the
        // limiter is not atomic across concurrent workers, under queue:work as under drover.
        Bus::chain([new Jobs\RateLimitedJob('multi_rate_limited'), new Jobs\RateLimitedJob('multi_rate_limited')])->onConnection($connection)->dispatch();
        // batch_1 adds batch_3 to its batch as it runs.
        Bus::batch([new Jobs\BatchedJob('batch_1', add: 'batch_3'), new Jobs\BatchedJob('batch_2')])->name('matrix')->onConnection($connection)->dispatch();
        // Cancelled before any worker runs (they start after this command): both jobs skipped.
        $cancelled = Bus::batch([
            new Jobs\BatchedJob('cancelled_batch_1', skipIfCancelled: true),
            new Jobs\BatchedJob('cancelled_batch_2', skipIfCancelled: true),
        ])->name('cancelled')->onConnection($connection)->dispatch();
        $cancelled->cancel();
        Journal::record('cancelled_batch_1', Jobs\BatchedJob::skipIfCancelledInUse(), 0);
        // One job fails; the test retries it with `queue:retry-batch` after the first drain.
        Bus::batch([new Jobs\BatchedJob('retry_batch_ok'), new Jobs\BatchedJob('retry_batch_fails_once', failsOnce: true)])
            ->name('retry')->allowFailures()->onConnection($connection)->dispatch();

        $this->info('matrix dispatched to ' . $this->argument('connection'));
        return 0;
    }

    /** Whether the connection's queue table has the job labelled $label (in this transaction). */
    private function queued(string $label): bool
    {
        $table = $this->argument('connection') === 'database' ? 'jobs' : 'drover.jobs';
        return DB::table($table)->where('payload', 'like', '%"label":"' . $label . '"%')->exists();
    }
}
