<?php

namespace Drover\Console;

use Illuminate\Console\Scheduling\Schedule;

/** `php artisan drover:schedule-resume {task}`: the task's due times run again. */
class ScheduleResumeCommand extends ScheduleTaskCommand
{
    protected $signature = 'drover:schedule-resume {task : The task, as schedule:list names it, or its key}';

    protected $description = 'Resume a paused scheduled task';

    public function handle(Schedule $schedule): int
    {
        $task = $this->task($schedule);
        if ($task === null) {
            return 1;
        }
        $this->info($this->runs()->resume($task[0])
            ? "drover: \"{$task[1]}\" is resumed"
            : "drover: \"{$task[1]}\" was not paused");
        return 0;
    }
}
