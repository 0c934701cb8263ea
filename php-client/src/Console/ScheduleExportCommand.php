<?php

namespace Drover\Console;

use Drover\Schedule\Tasks;
use Illuminate\Console\Command;
use Illuminate\Console\Scheduling\Schedule;

/**
 * `php artisan drover:schedule-export`: the application's schedule as the drover master reads it
 * (one JSON document: each task's key, expression, zone, repetition and options), run by the
 * master at its start and at each reload. docs/schedule.md.
 */
class ScheduleExportCommand extends Command
{
    protected $signature = 'drover:schedule-export';

    protected $description = 'Print the schedule as the drover master reads it (JSON)';

    public function handle(Schedule $schedule): int
    {
        $this->getOutput()->writeln(
            json_encode(Tasks::export($schedule), JSON_UNESCAPED_SLASHES | JSON_THROW_ON_ERROR),
            \Symfony\Component\Console\Output\OutputInterface::OUTPUT_RAW
        );
        return 0;
    }
}
