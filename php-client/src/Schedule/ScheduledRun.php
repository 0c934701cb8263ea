<?php

namespace Drover\Schedule;

use Exception;
use Illuminate\Console\Events\ScheduledTaskFailed;
use Illuminate\Console\Events\ScheduledTaskFinished;
use Illuminate\Console\Events\ScheduledTaskSkipped;
use Illuminate\Console\Events\ScheduledTaskStarting;
use Illuminate\Console\Scheduling\CallbackEvent;
use Illuminate\Console\Scheduling\Event;
use Illuminate\Console\Scheduling\Schedule;
use Illuminate\Contracts\Debug\ExceptionHandler;
use Illuminate\Contracts\Events\Dispatcher;
use Illuminate\Contracts\Foundation\Application;
use Throwable;

/**
 * One due time of one scheduled event, run as `schedule:run` runs it
 * (`Illuminate\Console\Scheduling\ScheduleRunCommand::runEvent`): the master decided that it is
 * due (its expression, zone and repetition) and, for `onOneServer()`, that this host has it; the
 * rest is Laravel's and is decided here, at run time — maintenance mode and environments (the
 * rest of `Event::isDue`), the filters (`when`, `skip`, `between`), the overlapping mutex, the
 * hooks, the output, and the events ScheduledTaskStarting / Finished / Failed / Skipped.
 *
 * The outcome is one JSON line (`result()`), the last the command prints.
 */
final class ScheduledRun
{
    /**
     * This process runs a task for drover (drover:schedule-run, or a run forked from a zygote):
     * Laravel's own scheduler starting a task anywhere else is a second scheduler
     * (Listeners\WarnOfASecondScheduler).
     */
    public static bool $inDrover = false;

    /** How much of the task's output file the history keeps, bytes from its end. */
    public const OUTPUT_TAIL = 4096;

    /** @var array{outcome: string, reason: ?string, exit_code: ?int, error: ?string, output_tail: ?string} */
    private array $result = [
        'outcome' => 'failed',
        'reason' => null,
        'exit_code' => null,
        'error' => null,
        'output_tail' => null,
    ];

    public function __construct(
        private Application $app,
        private Dispatcher $dispatcher,
        private ExceptionHandler $handler,
    ) {
    }

    /**
     * Runs the task `$key` (at `$index`) of `$schedule`: the outcome (see `line()`) and the exit
     * code of the process that ran it — 0, 1 when it failed, 2 when it is not in the schedule.
     * Shared by `drover:schedule-run` (started by the master) and a one-off forked from a zygote.
     * `$due`: the due time it is for (Unix seconds), when it is one — an `onOneServer()` task then
     * takes Laravel's own mutex as `schedule:run` does (OneServer); null for "run now".
     *
     * @return array{0: array<string, mixed>, 1: int}
     */
    public function runTask(Schedule $schedule, string $key, int $index, ?int $due = null): array
    {
        $event = Tasks::find($schedule, $key, $index);
        if ($event === null) {
            return [[
                'outcome' => 'failed',
                'reason' => 'not in the schedule',
                'exit_code' => null,
                'error' => "the task {$key} is not in the application's schedule (it changed since the master read it: `drover restart` reloads it)",
                'output_tail' => null,
            ], 2];
        }
        $oneServer = $due !== null && $event->onOneServer
            ? fn (): ?string => (new OneServer(RunHistory::of($this->app)))->refusal($schedule, $event, $key, $due)
            : null;
        $result = $this->run($event, $oneServer);
        return [$result, $result['outcome'] === 'failed' ? 1 : 0];
    }

    /**
     * Runs `$event`; returns the outcome (see `line()`). `$oneServer`, for an `onOneServer()`
     * task's due time: asked once the filters passed, as `schedule:run` asks its mutex — why not
     * to run (Laravel's scheduler took it), or null.
     *
     * @param (callable(): ?string)|null $oneServer
     */
    public function run(Event $event, ?callable $oneServer = null): array
    {
        self::$inDrover = true;
        if ($this->app->isDownForMaintenance() && !$event->runsInMaintenanceMode()) {
            return $this->skipped('maintenance mode');
        }
        if (!$event->runsInEnvironment($this->app->environment())) {
            return $this->skipped('not in this environment (' . $this->app->environment() . ')');
        }
        if (!$event->filtersPass($this->app)) {
            $this->dispatcher->dispatch(new ScheduledTaskSkipped($event));
            // withoutOverlapping() is a filter of Laravel's too: its mutex held by a run still out.
            return $this->skipped($event->withoutOverlapping && $event->mutex->exists($event)
                ? 'overlapping: a run of it is still out (withoutOverlapping)'
                : 'its filters (when, skip, between) said no');
        }
        $taken = $oneServer === null ? null : $oneServer();
        if ($taken !== null) {
            return $this->skipped($taken);
        }
        [$output, $from] = $this->captureOutput($event);
        $this->dispatcher->dispatch(new ScheduledTaskStarting($event));
        $start = microtime(true);
        // A closure's output is the history's tail (and still the process's output).
        $echo = $event instanceof CallbackEvent && ob_start();
        try {
            $event->run($this->app);
            $this->dispatcher->dispatch(new ScheduledTaskFinished($event, round(microtime(true) - $start, 2)));
            if ($event->withoutOverlapping && $event->exitCode === null && !$event->runInBackground) {
                // Event::run returned before starting: its mutex was held by a run still out.
                $this->result = ['outcome' => 'skipped', 'reason' => 'overlapping: a run of it is still out (withoutOverlapping)']
                    + $this->result;
            } elseif ($event->runInBackground && !$event instanceof CallbackEvent) {
                $this->result = ['outcome' => 'started', 'reason' => 'in the background (runInBackground): schedule:finish ends it']
                    + $this->result;
            } elseif ((int) $event->exitCode !== 0) {
                throw new Exception("Scheduled command [{$event->command}] failed with exit code [{$event->exitCode}].");
            } else {
                $this->result = ['outcome' => 'succeeded', 'exit_code' => 0] + $this->result;
            }
        } catch (Throwable $e) {
            $this->dispatcher->dispatch(new ScheduledTaskFailed($event, $e));
            $this->handler->report($e);
            $this->result = [
                'outcome' => 'failed',
                'exit_code' => $event->exitCode === null ? null : (int) $event->exitCode,
                'error' => get_class($e) . ': ' . $e->getMessage(),
            ] + $this->result;
        } finally {
            if ($echo) {
                $echoed = (string) ob_get_clean();
                echo $echoed;
                $this->result['output_tail'] = $echoed === '' ? null : substr($echoed, -self::OUTPUT_TAIL);
            } else {
                $this->result['output_tail'] = self::tail($output, $from);
            }
            if ($output !== null && $from === -1) {
                @unlink($output);
            }
        }
        return $this->result;
    }

    /** The outcome as the line the master reads. */
    public static function line(array $result): string
    {
        return json_encode(['drover_schedule_run' => 1] + $result, JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE);
    }

    private function skipped(string $reason): array
    {
        return $this->result = ['outcome' => 'skipped', 'reason' => $reason] + $this->result;
    }

    /**
     * Where a command's output goes, and from which byte this run's begins: the file the event
     * names (appended to or not), or, when it sends its output nowhere (Laravel's /dev/null), a
     * file of our own (-1: removed afterwards) so that the history keeps its tail. A closure's
     * output is its process's, which the master reads.
     *
     * @return array{0: ?string, 1: int}
     */
    private function captureOutput(Event $event): array
    {
        if ($event instanceof CallbackEvent || $event->runInBackground) {
            return [null, 0];
        }
        if ($event->output === $event->getDefaultOutput()) {
            $file = tempnam(sys_get_temp_dir(), 'drover-schedule-');
            if ($file === false) {
                return [null, 0];
            }
            $event->output = $file;
            $event->shouldAppendOutput = false;
            return [$file, -1];
        }
        clearstatcache(true, $event->output);
        return [$event->output, $event->shouldAppendOutput && is_file($event->output) ? (int) filesize($event->output) : 0];
    }

    private static function tail(?string $file, int $from): ?string
    {
        if ($file === null || !is_file($file)) {
            return null;
        }
        clearstatcache(true, $file);
        $size = (int) filesize($file);
        $start = max($from, 0, $size - self::OUTPUT_TAIL);
        if ($size <= $start) {
            return '';
        }
        $text = file_get_contents($file, false, null, $start, $size - $start);
        return $text === false ? null : $text;
    }
}
