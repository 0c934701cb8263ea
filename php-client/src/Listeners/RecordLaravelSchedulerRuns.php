<?php

namespace Drover\Listeners;

use Drover\Schedule\RunHistory;
use Drover\Schedule\ScheduledRun;
use Drover\Schedule\Tasks;
use Illuminate\Console\Events\ScheduledTaskFailed;
use Illuminate\Console\Events\ScheduledTaskFinished;
use Illuminate\Console\Events\ScheduledTaskStarting;
use Illuminate\Console\Scheduling\Event;
use Illuminate\Console\Scheduling\Schedule;
use Illuminate\Contracts\Foundation\Application;

/**
 * The runs of Laravel's own scheduler — a cron `schedule:run` or a `schedule:work` still running
 * during a cutover — recorded in drover's schedule history (RunHistory, scope `laravel:HOST`),
 * so the masters say in their log and status that it runs, where, and what it ran
 * (docs/schedule.md, "Beside cron"). Only in such a process (not in drover's own runs, nor a task
 * run by hand with schedule:test); nothing when drover's schema is not there.
 */
final class RecordLaravelSchedulerRuns
{
    /** @var array<int, array{0: float, 1: int}> by event: when it started, and its due time (Unix seconds) */
    private array $starts = [];

    public function __construct(private readonly Application $app)
    {
    }

    public function __invoke(object $event): void
    {
        $how = self::scheduler();
        if ($how === null || ScheduledRun::$inDrover) {
            return;
        }
        $task = $event->task;
        $id = spl_object_id($task);
        if ($event instanceof ScheduledTaskStarting) {
            $now = microtime(true);
            // schedule:run's due time: its minute, or the second for a sub-minute task.
            $repeats = method_exists($task, 'isRepeatable') && $task->isRepeatable();
            $this->starts[$id] = [$now, $repeats ? (int) $now : intdiv((int) $now, 60) * 60];
            return;
        }
        if (!$event instanceof ScheduledTaskFinished && !$event instanceof ScheduledTaskFailed) {
            return;
        }
        [$startedAt, $due] = $this->starts[$id] ?? [microtime(true), intdiv(time(), 60) * 60];
        unset($this->starts[$id]);
        $failed = $event instanceof ScheduledTaskFailed || ((int) ($task->exitCode ?? 0)) !== 0;
        try {
            RunHistory::of($this->app)->recordLaravelRun(
                $this->key($task),
                Tasks::summary($task),
                $due,
                (string) gethostname(),
                $how,
                $failed ? 'failed' : 'succeeded',
                $task->exitCode === null ? null : (int) $task->exitCode,
                $startedAt,
                microtime(true),
            );
        } catch (\Throwable) {
            // No drover schema here, or no database: nothing to tell the masters.
        }
    }

    /** `schedule:run` or `schedule:work` when this process is Laravel's scheduler; else null. */
    private static function scheduler(): ?string
    {
        $argv = $_SERVER['argv'] ?? [];
        foreach (['schedule:run', 'schedule:work'] as $command) {
            if (in_array($command, $argv, true)) {
                return $command;
            }
        }
        return null;
    }

    /** The task's key as drover names it (Tasks::keyed): its mutex name, `#N` on shared ones. */
    private function key(Event $task): string
    {
        foreach (Tasks::keyed($this->app->make(Schedule::class)) as $keyed) {
            if ($keyed['event'] === $task) {
                return $keyed['key'];
            }
        }
        return $task->mutexName();
    }
}
