<?php

namespace Drover\Listeners;

use Drover\Schedule\RunHistory;
use Drover\Schedule\ScheduledRun;
use Illuminate\Contracts\Foundation\Application;

/**
 * Laravel's own scheduler (`schedule:run` from a cron line, `schedule:work`) starting a task
 * while drover masters run this application's schedule: a task without `onOneServer()` runs once
 * more per due time (here and on each master's host); an `onOneServer()` one still runs once,
 * since both take Laravel's mutex (Schedule\OneServer). Detected on ScheduledTaskStarting in a
 * process that is not one of drover's runs, by the drover runs due in the last three minutes;
 * said once per process on stderr (which cron mails) and in the application's log, naming the fix
 * (docs/schedule.md, "Beside cron"). What it runs is recorded for the masters
 * (RecordLaravelSchedulerRuns).
 */
final class WarnOfASecondScheduler
{
    /** Said once per process. */
    private static bool $said = false;

    public function __construct(private readonly Application $app)
    {
    }

    public function __invoke(object $event): void
    {
        if (self::$said || ScheduledRun::$inDrover) {
            return;
        }
        // Only Laravel's scheduler itself (schedule:work starts a schedule:run each minute): a
        // task run by hand (schedule:test) runs once, on purpose.
        $argv = $_SERVER['argv'] ?? [];
        if (!in_array('schedule:run', $argv, true) && !in_array('schedule:work', $argv, true)) {
            return;
        }
        self::$said = true;
        try {
            $hosts = RunHistory::of($this->app)->droverHostsInLastThreeMinutes();
        } catch (\Throwable) {
            return; // no drover schema here, or no database: nothing to compare with
        }
        if ($hosts === 0) {
            return;
        }
        $line = 'drover: this schedule is also run by drover (php artisan drover runs it: runs due in the last three minutes): '
            . 'a task without onOneServer() runs once more per due time (here and on each master\'s host); onOneServer() tasks still run once (both take Laravel\'s mutex). '
            . 'Remove the `schedule:run` cron line or the `schedule:work` program on hosts where drover runs, or set DROVER_SCHEDULE=false where drover should not run it (docs/schedule.md, "Beside cron").';
        if ($this->app->runningInConsole()) {
            fwrite(STDERR, $line . "\n");
        }
        $this->app['log']->warning($line);
    }
}
