<?php

namespace App\Console;

use Illuminate\Console\Scheduling\Event;
use Illuminate\Console\Scheduling\Schedule;

/**
 * The schedule of the scheduler's tests (tests/schedule.rs), on Laravel 8 (Kernel::schedule) and
 * 12 (bootstrap/app.php's withSchedule): defined only when DROVER_TEST_SCHEDULE names a scenario,
 * so the fixture's other tests run no schedule. Each task that runs appends a line to
 * storage/schedule-runs.log: its name, the time, its pid and its host.
 */
final class TestSchedule
{
    public static function define(Schedule $schedule): void
    {
        $scenario = getenv('DROVER_TEST_SCHEDULE');
        if (!is_string($scenario) || $scenario === '') {
            return;
        }
        if ($scenario === 'basics') {
            // onOneServer(), but not for the schedule:run oracle: a drover run of closure in the
            // oracle's minute holds Laravel's mutex for it, which schedule:run honours (it would
            // skip it: docs/schedule.md, "Beside cron"). The mutex's name is the same either way.
            $closure = $schedule->call(fn () => self::record('closure'))->everyMinute()->name('closure');
            if (!getenv('DROVER_TEST_ORACLE')) {
                $closure->onOneServer();
            }
            $schedule->command('app:scheduled hello')->everyMinute();
            $schedule->call(fn () => self::record('filtered'))->everyMinute()->name('filtered')->when(fn () => false);
            $schedule->call(function () {
                throw new \RuntimeException('the task broke');
            })->everyMinute()->name('throws');
            $schedule->call(fn () => self::record('elsewhere'))->everyMinute()->name('elsewhere')->environments(['production']);
            // withoutOverlapping: the test holds the task's mutex (Laravel's cache lock) as a run
            // still out would, so each due time is skipped, as schedule:run skips it.
            $schedule->call(fn () => self::record('overlapping'))->everyMinute()->name('overlapping')->withoutOverlapping(10);
            // A command the application does not have: failed, by its exit code.
            $schedule->command('app:no-such-command')->everyMinute();
            // Laravel's hooks around the event.
            $schedule->call(fn () => self::record('hooked'))->everyMinute()->name('hooked')
                ->before(fn () => self::record('before'))
                ->after(fn () => self::record('after'))
                ->onSuccess(fn () => self::record('on-success'))
                ->onFailure(fn () => self::record('on-failure'));
            // A time window around now (Laravel works it out as the schedule is defined; over
            // midnight too), and its opposite.
            $from = now()->subMinutes(30)->format('H:i');
            $to = now()->addMinutes(30)->format('H:i');
            $schedule->call(fn () => self::record('between'))->everyMinute()->name('between')->between($from, $to);
            $schedule->call(fn () => self::record('unless-between'))->everyMinute()->name('unless-between')->unlessBetween($from, $to);
            // Another zone (a minute there is a minute here).
            $schedule->call(fn () => self::record('zoned'))->everyMinute()->name('zoned')->timezone('Asia/Kathmandu');
            // Output to a file of the application's, a shell command, a job onto drover's queue,
            // and a command in the background.
            $schedule->command('app:scheduled file')->everyMinute()->sendOutputTo(storage_path('scheduled-output.txt'));
            // (A shell of its own: Laravel sends the command's own output to its output file.)
            $schedule->exec('sh', ['-c', 'echo "exec $(date +%s.%N) $$ $(hostname) exec" >> ' . escapeshellarg(storage_path('schedule-runs.log'))])->everyMinute();
            $schedule->job(new \App\Jobs\OkJob('scheduled_job'))->everyMinute();
            $schedule->command('app:scheduled background')->everyMinute()->runInBackground();
            // An expression Laravel takes and cron cannot: named in the master's log, left out.
            // (schedule:run, the oracle, stops at it: not for the oracle.)
            if (!getenv('DROVER_TEST_ORACLE')) {
                $schedule->call(fn () => self::record('bad-cron'))->cron('61 * * * *')->name('bad-cron');
            }
            // Sub-minute frequencies are Laravel 10's and later (not for the schedule:run
            // oracle: its run would loop through the rest of the minute).
            if (method_exists(Event::class, 'everyTwoSeconds') && !getenv('DROVER_TEST_ORACLE')) {
                $schedule->call(fn () => self::record('two-seconds'))->everyTwoSeconds()->name('two-seconds')->onOneServer();
            }
        }
        if ($scenario === 'bench') {
            // bench --schedule: a closure every second (Laravel 10+) and one every minute, each
            // recording when it started, and 48 tasks due once a year: 50 tasks.
            if (method_exists(Event::class, 'everySecond')) {
                $schedule->call(fn () => self::record('tick'))->everySecond()->name('tick');
            }
            $schedule->call(fn () => self::record('minute'))->everyMinute()->name('minute');
            for ($i = 1; $i <= 48; $i++) {
                $schedule->call(fn () => self::record("yearly-$i"))->yearly()->name("yearly-$i");
            }
        }
        if ($scenario === 'dashboard') {
            // tests/dashboard.rs: a task that never comes due in the test, run from the
            // dashboard's "Run now", paused and resumed there.
            $schedule->call(function () {
                echo "report written\n";
                self::record('yearly-report');
            })->yearly()->name('yearly report')->onOneServer();
        }
        if ($scenario === 'fleet') {
            // Every ten seconds where Laravel has it (10+), else every minute: one task once across
            // the masters, one on each host that takes three seconds (a run in progress to kill).
            $often = method_exists(Event::class, 'everyTenSeconds');
            $one = $schedule->call(fn () => self::record('fleet-one'))->name('fleet-one')->onOneServer();
            $each = $schedule->call(function () {
                self::record('fleet-each');
                sleep(3);
                self::record('fleet-each-end');
            })->name('fleet-each');
            foreach ([$one, $each] as $event) {
                $often ? $event->everyTenSeconds() : $event->everyMinute();
            }
        }
        if ($scenario === 'journey') {
            // bench/src/bin/journey.rs: a team's schedule, one task of onOneServer() and one
            // without, each minute; each run says who ran it, Laravel's schedule:run (cron's
            // line) or a master.
            $by = fn (): string => in_array('schedule:run', $_SERVER['argv'] ?? [], true) ? 'cron' : 'drover';
            $schedule->call(fn () => self::record('journey-one:' . $by()))->everyMinute()->name('journey-one')->onOneServer();
            $schedule->call(fn () => self::record('journey-each:' . $by()))->everyMinute()->name('journey-each');
        }
    }

    public static function record(string $name): void
    {
        file_put_contents(
            storage_path('schedule-runs.log'),
            // How the run came: forked from a pool's zygote (its command line is the zygote's
            // drover:work) or started as drover:schedule-run.
            sprintf("%s %.3f %d %s %s\n", $name, microtime(true), getmypid(), gethostname(), in_array('drover:work', $_SERVER['argv'] ?? [], true) ? 'fork' : 'exec'),
            FILE_APPEND | LOCK_EX
        );
    }
}
