<?php

namespace Drover\Console;

use Illuminate\Console\Scheduling\Schedule;

/**
 * `php artisan drover:schedule-run-now {task}`: the first master that runs the schedule runs the
 * task once, within a few seconds, paused or not (unlike `schedule:test`, on a master, with its
 * history).
 */
class ScheduleRunNowCommand extends ScheduleTaskCommand
{
    protected $signature = 'drover:schedule-run-now {task : The task, as schedule:list names it, or its key}';

    protected $description = 'Have a drover master run a scheduled task now, once across the fleet';

    public function handle(Schedule $schedule): int
    {
        $task = $this->task($schedule);
        if ($task === null) {
            return 1;
        }
        $this->runs()->runNow($task[0], $task[1], $this->who());
        $this->info("drover: \"{$task[1]}\" was asked to run now: a master that runs the schedule starts it within a few seconds (its run is in drover:status and the dashboard)");
        return 0;
    }
}
