<?php

namespace Drover\Schedule;

use DateTimeZone;
use Illuminate\Console\Scheduling\Event;
use Illuminate\Console\Scheduling\Schedule;

/**
 * The application's scheduled events as drover names them: each event's key is Laravel's mutex
 * name (the expression and command of a command, the description of a closure), with `#2`, `#3`…
 * on events that share one, so that it is the same in every process and across deploys that keep
 * the event. The master reads the export (`drover:schedule-export`), decides when each task is
 * due, and starts `drover:schedule-run` with the key and the position, which finds the event
 * again here.
 */
final class Tasks
{
    /** The export's format version (scheduler/src/task.rs, EXPORT_VERSION). */
    public const EXPORT_VERSION = 1;

    /** @return array<int, array{key: string, event: Event}> in the schedule's order */
    public static function keyed(Schedule $schedule): array
    {
        $seen = [];
        $out = [];
        foreach (array_values($schedule->events()) as $event) {
            $name = $event->mutexName();
            $seen[$name] = ($seen[$name] ?? 0) + 1;
            $out[] = [
                'key' => $seen[$name] === 1 ? $name : $name . '#' . $seen[$name],
                'event' => $event,
            ];
        }
        return $out;
    }

    /** The export document: what the master needs to know when each task is due. */
    public static function export(Schedule $schedule): array
    {
        $tasks = [];
        foreach (self::keyed($schedule) as $index => $keyed) {
            $event = $keyed['event'];
            $repeat = property_exists($event, 'repeatSeconds') ? $event->repeatSeconds : null;
            $tasks[] = [
                'key' => $keyed['key'],
                'index' => $index,
                'summary' => self::summary($event),
                'expression' => (string) $event->expression,
                'timezone' => self::timezone($event),
                'repeat_seconds' => $repeat === null ? null : (int) $repeat,
                'one_server' => (bool) $event->onOneServer,
                'without_overlapping' => (bool) $event->withoutOverlapping,
                'expires_minutes' => (int) $event->expiresAt,
                'run_in_background' => (bool) $event->runInBackground,
                'even_in_maintenance' => (bool) $event->evenInMaintenanceMode,
                'catch_up' => CatchUp::wants($event),
                'needs_boot' => self::capturesDefinitionTime($event),
            ];
        }
        return ['drover_schedule' => self::EXPORT_VERSION, 'tasks' => $tasks];
    }

    /**
     * What the task is called in the history and logs: its description, else a command's
     * command line without the PHP binary (`artisan app:report`, as `schedule:list` shows it),
     * else the closure's summary.
     */
    public static function summary(Event $event): string
    {
        if (is_string($event->description) && $event->description !== '') {
            return $event->description;
        }
        if (!$event instanceof \Illuminate\Console\Scheduling\CallbackEvent && is_string($event->command)) {
            return (string) preg_replace("/^'[^']*php[^']*' '?artisan'? /", 'artisan ', $event->command);
        }
        return (string) $event->getSummaryForDisplay();
    }

    /**
     * The zone the event's expression is read in: its own (`->timezone()`), else the process's
     * default, which Laravel sets from app.timezone — what `Event::isDue` uses.
     */
    public static function timezone(Event $event): string
    {
        $zone = $event->timezone;
        if ($zone instanceof DateTimeZone) {
            return $zone->getName();
        }
        if (is_string($zone) && $zone !== '') {
            return $zone;
        }
        return date_default_timezone_get();
    }

    /**
     * The event of `key`: at `index` when it is still there (the usual case), else wherever the
     * key is (the schedule changed since the export); null when the key is gone.
     */
    public static function find(Schedule $schedule, string $key, int $index): ?Event
    {
        $keyed = self::keyed($schedule);
        if (isset($keyed[$index]) && $keyed[$index]['key'] === $key) {
            return $keyed[$index]['event'];
        }
        foreach ($keyed as $candidate) {
            if ($candidate['key'] === $key) {
                return $candidate['event'];
            }
        }
        return null;
    }

    /**
     * Whether a filter of the event holds the time the schedule was defined at: `between()` and
     * `unlessBetween()` work the window out when they are called (Laravel defines the schedule
     * afresh in each `schedule:run`). Forked from a zygote that booted long before, the window
     * would be the boot's, so the master runs such a task by its command, which defines the
     * schedule anew (docs/schedule.md).
     */
    public static function capturesDefinitionTime(Event $event): bool
    {
        $closures = (fn () => array_merge($this->filters, $this->rejects))->call($event);
        foreach ($closures as $closure) {
            if (!$closure instanceof \Closure) {
                continue;
            }
            $captured = (new \ReflectionFunction($closure))->getStaticVariables();
            if (isset($captured['now'], $captured['startTime'], $captured['endTime'])) {
                return true;
            }
        }
        return false;
    }
}
