<?php

namespace Drover\Console;

use Illuminate\Console\Scheduling\Schedule;

/** `php artisan drover:schedule-pause {task}`: every master skips the task's due times until it is resumed. */
class SchedulePauseCommand extends ScheduleTaskCommand
{
    protected $signature = 'drover:schedule-pause {task : The task, as schedule:list names it, or its key}';

    protected $description = 'Pause a scheduled task on every master (its due times are skipped)';

    public function handle(Schedule $schedule): int
    {
        $task = $this->task($schedule);
        if ($task === null) {
            return 1;
        }
        $this->runs()->pause($task[0], $task[1], $this->who());
        $this->info("drover: \"{$task[1]}\" is paused: its due times are skipped until drover:schedule-resume");
        return 0;
    }
}
