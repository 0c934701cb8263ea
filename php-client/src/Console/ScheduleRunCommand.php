<?php

namespace Drover\Console;

use Drover\Schedule\ScheduledRun;
use Illuminate\Console\Command;
use Illuminate\Console\Scheduling\Schedule;

/**
 * `php artisan drover:schedule-run --task=KEY --index=N`: one due time of one scheduled task, run
 * by the drover master when it is due (and, for `onOneServer()`, once this host has claimed it).
 * Its last line is the outcome as JSON; its exit code is 0 unless the task failed (1) or is not
 * in the schedule (2). docs/schedule.md.
 */
class ScheduleRunCommand extends Command
{
    protected $signature = 'drover:schedule-run
        {--task= : The task\'s key (its mutex name, as drover:schedule-export gives it)}
        {--index= : Its position in the schedule}';

    protected $description = 'Run one due time of a scheduled task (run by the drover master)';

    public function handle(Schedule $schedule): int
    {
        $key = (string) $this->option('task');
        $index = $this->option('index');
        if ($key === '' || !is_numeric($index) || (int) $index < 0) {
            $this->error('drover:schedule-run needs --task=KEY and --index=N (from drover:schedule-export)');
            return 2;
        }
        [$result, $exit] = $this->laravel->make(ScheduledRun::class)
            ->runTask($schedule, $key, (int) $index, \Drover\Schedule\OneServer::dueFromEnvironment());
        $this->getOutput()->writeln("\n" . ScheduledRun::line($result), \Symfony\Component\Console\Output\OutputInterface::OUTPUT_RAW);
        return $exit;
    }
}
