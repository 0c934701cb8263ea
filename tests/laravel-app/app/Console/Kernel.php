<?php

namespace App\Console;

use Illuminate\Console\Scheduling\Schedule;
use Illuminate\Foundation\Console\Kernel as ConsoleKernel;

class Kernel extends ConsoleKernel
{
    // Listed explicitly: no Composer class map, no directory scan.
    protected $commands = [
        Commands\DispatchMatrix::class,
        Commands\ReportMatrix::class,
        Commands\DispatchDemo::class,
        Commands\DispatchBench::class,
        Commands\EvalCode::class,
        Commands\CapturePayloads::class,
        Commands\Scheduled::class,
    ];

    // The scheduler's tests' schedule (empty unless DROVER_TEST_SCHEDULE is set).
    protected function schedule(Schedule $schedule)
    {
        TestSchedule::define($schedule);
    }
}
