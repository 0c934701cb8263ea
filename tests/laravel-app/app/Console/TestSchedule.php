<?php

namespace App\Console;

use Illuminate\Console\Scheduling\Event;
use Illuminate\Console\Scheduling\Schedule;

/**
 * The schedule of the scheduler's tests (tests/schedule.rs), on Laravel 8 (Kernel::schedule) and
 * 12 (bootstrap/app.php's withSchedule): defined only when DROVER_TEST_SCHEDULE names a scenario,
 * so the fixture's other tests run no schedule. Each task that runs appends a line to
 * storage/schedule-runs.log: its name, the time and its pid.
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
            $schedule->call(fn () => self::record('closure'))->everyMinute()->name('closure')->onOneServer();
            $schedule->command('app:scheduled hello')->everyMinute();
            $schedule->call(fn () => self::record('filtered'))->everyMinute()->name('filtered')->when(fn () => false);
            $schedule->call(function () {
                throw new \RuntimeException('the task broke');
            })->everyMinute()->name('throws');
            $schedule->call(fn () => self::record('elsewhere'))->everyMinute()->name('elsewhere')->environments(['production']);
            // An expression Laravel takes and cron cannot: named in the master's log, left out.
            $schedule->call(fn () => self::record('bad-cron'))->cron('61 * * * *')->name('bad-cron');
            // Sub-minute frequencies are Laravel 10's and later.
            if (method_exists(Event::class, 'everyTwoSeconds')) {
                $schedule->call(fn () => self::record('two-seconds'))->everyTwoSeconds()->name('two-seconds')->onOneServer();
            }
        }
    }

    public static function record(string $name): void
    {
        file_put_contents(
            storage_path('schedule-runs.log'),
            sprintf("%s %.3f %d\n", $name, microtime(true), getmypid()),
            FILE_APPEND | LOCK_EX
        );
    }
}
