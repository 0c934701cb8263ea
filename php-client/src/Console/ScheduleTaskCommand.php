<?php

namespace Drover\Console;

use Drover\Config\Embedded;
use Drover\Dashboard\Repositories\ScheduleRepository;
use Drover\Schedule\Tasks;
use Illuminate\Console\Command;
use Illuminate\Console\Scheduling\Schedule;

/**
 * What the three schedule verbs share (`drover:schedule-pause`, `drover:schedule-resume`,
 * `drover:schedule-run-now`, docs/schedule.md): the task they name — by its key, or by its name
 * as `schedule:list` shows it when that names one task — and the history they act on.
 */
abstract class ScheduleTaskCommand extends Command
{
    /**
     * The task `{task}` names: its key and summary, or null (said why).
     *
     * @return array{0: string, 1: string}|null
     */
    protected function task(Schedule $schedule): ?array
    {
        $name = (string) $this->argument('task');
        $found = [];
        foreach (Tasks::keyed($schedule) as $keyed) {
            $summary = Tasks::summary($keyed['event']);
            if ($keyed['key'] === $name) {
                return [$keyed['key'], $summary];
            }
            if ($summary === $name) {
                $found[] = [$keyed['key'], $summary];
            }
        }
        if (count($found) === 1) {
            return $found[0];
        }
        $this->error(count($found) === 0
            ? "drover: no task of the schedule is named \"$name\" (php artisan schedule:list shows them; a task's key works too)"
            : "drover: " . count($found) . " tasks are named \"$name\": name one by its key (" . implode(', ', array_column($found, 0)) . ')');
        return null;
    }

    protected function runs(): ScheduleRepository
    {
        return new ScheduleRepository($this->laravel['db']->connection(Embedded::connectionName($this->laravel, config('drover.database') ?: null)));
    }

    /** Who acted, for the history. */
    protected function who(): string
    {
        return 'drover:' . explode(':', $this->getName() ?? 'schedule', 2)[1] . ' on ' . gethostname();
    }
}
