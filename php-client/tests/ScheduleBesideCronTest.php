<?php

namespace Drover\Tests;

use Drover\Listeners\RecordLaravelSchedulerRuns;
use Drover\Schedule\OneServer;
use Drover\Schedule\RunHistory;
use Illuminate\Console\Events\ScheduledTaskFinished;
use Illuminate\Console\Events\ScheduledTaskStarting;
use Illuminate\Console\Scheduling\Schedule;
use Illuminate\Support\Facades\Date;
use PHPUnit\Framework\TestCase;

/**
 * Laravel's own scheduler beside the masters during a cutover (docs/schedule.md, "Beside cron"):
 * an `onOneServer()` due time runs once whichever takes Laravel's mutex first — a cron
 * `schedule:run` (Laravel's own Schedule::serverShouldRun, as its command calls it) or a master's
 * run (OneServer) — and what Laravel's scheduler runs is recorded for the masters to say. On the
 * application's real cache store and drover's schema in PostgreSQL.
 */
final class ScheduleBesideCronTest extends TestCase
{
    private static ?DashboardApp $app = null;

    private static function app(): \Illuminate\Foundation\Application
    {
        return (self::$app ??= DashboardApp::boot())->app;
    }

    /** A process's own view of the schedule (Laravel 12 keeps a mutex's answer per Schedule). */
    private static function scheduleOfAProcess(): Schedule
    {
        return new Schedule('UTC');
    }

    private static function minute(int $offset): int
    {
        // Minutes no other test of this process takes, an hour ahead, one per test.
        return (intdiv(time(), 60) + 60 + $offset) * 60;
    }

    public function testAnOnOneServerDueTimeRunsOnceWhicheverTakesLaravelsMutexFirst(): void
    {
        $app = self::app();
        $task = self::scheduleOfAProcess()->call(fn () => null)->everyMinute()->name('beside-cron-report')->onOneServer();
        $one = new OneServer(RunHistory::of($app));

        // Cron's schedule:run first: the master's run of the minute skips it, naming why.
        $due = self::minute(1);
        $cron = self::scheduleOfAProcess();
        $this->assertTrue($cron->serverShouldRun($task, Date::createFromTimestamp($due, date_default_timezone_get())), 'cron took the minute');
        $this->assertSame(OneServer::TAKEN_BY_LARAVEL, $one->refusal(self::scheduleOfAProcess(), $task, 'beside-cron-report', $due));

        // The master first, the next minute: schedule:run finds the mutex taken and skips it.
        $due = self::minute(2);
        $this->assertNull($one->refusal(self::scheduleOfAProcess(), $task, 'beside-cron-report', $due), 'the master takes the minute');
        $this->assertFalse(self::scheduleOfAProcess()->serverShouldRun($task, Date::createFromTimestamp($due, date_default_timezone_get())), 'cron skips it');
    }

    public function testASubMinuteTasksLaterRunsGoOnWhenTheMasterTookItsMinuteAndSkipWhenCronDid(): void
    {
        $app = self::app();
        $db = $app['db']->connection('pgsql');
        $task = self::scheduleOfAProcess()->call(fn () => null)->everyMinute()->name('beside-cron-ticks')->onOneServer();
        $one = new OneServer(RunHistory::of($app));
        $due = self::minute(3);
        $this->assertNull($one->refusal(self::scheduleOfAProcess(), $task, 'beside-cron-ticks', $due));
        // That first run of the minute, as the master records it; the next, two seconds on.
        $db->insert("INSERT INTO drover.schedule_runs (task, summary, due_at, scope, host, status) VALUES ('beside-cron-ticks', 'ticks', to_timestamp(?), '', 'h1', 'succeeded')", [$due]);
        $this->assertNull($one->refusal(self::scheduleOfAProcess(), $task, 'beside-cron-ticks', $due + 2), 'drover holds the minute');

        // A minute cron took: every run of it is skipped.
        $due = self::minute(4);
        $this->assertTrue(self::scheduleOfAProcess()->serverShouldRun($task, Date::createFromTimestamp($due, date_default_timezone_get())));
        foreach ([0, 2, 4] as $second) {
            $this->assertSame(OneServer::TAKEN_BY_LARAVEL, $one->refusal(self::scheduleOfAProcess(), $task, 'beside-cron-ticks', $due + $second));
        }
    }

    public function testWhatLaravelsSchedulerRunsIsRecordedForTheMastersAndNothingOfDroversOwnRuns(): void
    {
        $app = self::app();
        $db = $app['db']->connection('pgsql');
        $task = $app->make(Schedule::class)->call(fn () => null)->everyMinute()->name('beside-cron-recorded');
        $recorder = new RecordLaravelSchedulerRuns($app);
        $argv = $_SERVER['argv'] ?? [];
        try {
            $_SERVER['argv'] = ['artisan', 'schedule:run'];
            $recorder(new ScheduledTaskStarting($task));
            $task->exitCode = 0;
            $recorder(new ScheduledTaskFinished($task, 0.01));
            // The same task in a process that is not Laravel's scheduler: nothing.
            $_SERVER['argv'] = ['artisan', 'schedule:test'];
            $recorder(new ScheduledTaskStarting($task));
            $recorder(new ScheduledTaskFinished($task, 0.01));
        } finally {
            $_SERVER['argv'] = $argv;
        }
        $rows = $db->select("SELECT scope, host, status, reason FROM drover.schedule_runs WHERE summary = 'beside-cron-recorded'");
        $this->assertCount(1, $rows);
        $this->assertSame(RunHistory::LARAVEL_SCOPE_PREFIX . gethostname(), $rows[0]->scope);
        $this->assertSame(['succeeded', (string) gethostname()], [$rows[0]->status, $rows[0]->host]);
        $this->assertStringContainsString("Laravel's own scheduler (schedule:run)", $rows[0]->reason);
    }
}
