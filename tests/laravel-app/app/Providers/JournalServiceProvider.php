<?php

namespace App\Providers;

use App\Support\Journal;
use Illuminate\Queue\Events\JobExceptionOccurred;
use Illuminate\Queue\Events\JobFailed;
use Illuminate\Queue\Events\JobProcessed;
use Illuminate\Queue\Events\JobProcessing;
use Illuminate\Queue\Queue;
use Illuminate\Cache\RateLimiting\Limit;
use Illuminate\Support\Facades\RateLimiter;
use Illuminate\Support\ServiceProvider;

/**
 * Records every queue event of every job in the `journal` table, keyed by the job's label, so a
 * run through queue:work and a run through drover can be compared event by event.
 */
class JournalServiceProvider extends ServiceProvider
{
    public function boot(): void
    {
        // One run per minute for RateLimitedJob: of two dispatched, one runs, one is dropped.
        RateLimiter::for('matrix', fn () => Limit::perMinute(1));
        // One per minute too, for the RateLimitedJob that releases (it ends the window itself).
        RateLimiter::for('matrix_release', fn () => Limit::perMinute(1));
        // bench/src/limits.rs: 10 per second (Laravel 8: per minute).
        RateLimiter::for('bench_rate', fn () => method_exists(Limit::class, 'perSecond') ? Limit::perSecond(10) : Limit::perMinute(10));
        // tests/limits.rs: 3 per second by the job's key (Laravel 8 has no perSecond: per minute).
        RateLimiter::for('tests_rate', fn ($job) => (method_exists(Limit::class, 'perSecond') ? Limit::perSecond(3) : Limit::perMinute(3))->by($job->key));

        // The label travels in the payload, readable without unserializing (or decrypting) the job.
        Queue::createPayloadUsing(function ($connection, $queue, $payload) {
            $command = $payload['data']['command'] ?? null;
            return is_object($command) && isset($command->label) ? ['label' => $command->label] : [];
        });
        $events = $this->app['events'];
        // Only labelled (matrix) jobs are journaled: the benchmark's jobs must not pay for it.
        $record = fn (string $event) => function ($e) use ($event) {
            $label = $e->job->payload()['label'] ?? null;
            if ($label !== null) {
                Journal::record($label, $event, $e->job->attempts(), $e->connectionName);
            }
        };
        $events->listen(JobProcessing::class, $record('processing'));
        $events->listen(JobProcessed::class, $record('processed'));
        $events->listen(JobExceptionOccurred::class, $record('exception'));
        $events->listen(JobFailed::class, $record('failed'));
        // A queued listener with an ordered group (tests/groups.rs).
        $events->listen(\App\Events\GroupedEvent::class, \App\Listeners\GroupedListener::class);

        // Long-wait alerts: journaled, and sent to a webhook the test listens on.
        $events->listen(\Drover\Events\LongWaitDetected::class, function ($e) {
            $held = isset($e->group) ? " group {$e->group}" : (isset($e->key) ? " key {$e->key}" : '');
            Journal::record("{$e->connection}:{$e->queue}$held", 'long_wait', 0, $e->connection);
        });
        // Scheduled task alerts (tests/schedule.rs): journaled by the task's summary.
        $events->listen(\Drover\Events\ScheduledTaskAlert::class, function ($e) {
            Journal::record($e->summary, 'schedule_alert', $e->failures, 'schedule');
        });
        // The dashboard's gate: open to guests when a test says so (to check that a gate that
        // allows is obeyed in production).
        \Illuminate\Support\Facades\Gate::define('viewDrover', fn ($user = null) => (bool) env('DROVER_TEST_GATE_OPEN', false));
        // The gate to act (tests/dashboard.rs): defined only when a test sets it, open or shut.
        if (is_string(env('DROVER_TEST_OPERATE_GATE'))) {
            \Illuminate\Support\Facades\Gate::define('operateDrover', fn ($user = null) => env('DROVER_TEST_OPERATE_GATE') === 'open');
        }
        $slack = env('DROVER_TEST_SLACK_URL');
        if (is_string($slack) && $slack !== '') {
            \Drover\Drover::routeSlackNotificationsTo($slack, '#queues');
        }
    }
}
