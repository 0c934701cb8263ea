<?php

namespace Drover\Schedule;

use Illuminate\Console\Scheduling\Event;
use Illuminate\Console\Scheduling\Schedule;
use Illuminate\Support\Facades\Date;

/**
 * A due time of an `onOneServer()` task, run by a master while Laravel's own scheduler may still
 * run beside it (a cron `schedule:run` or `schedule:work` during a cutover; docs/schedule.md,
 * "Beside cron"). The masters' claim (`drover.schedule_runs`) makes one master run it; Laravel's
 * scheduler knows nothing of it and takes its own mutex — the cache lock `onOneServer()` uses, per
 * task and minute. So a drover run takes that mutex too, as `schedule:run` does: whichever takes
 * it first runs the due time, the other skips it, and each due time runs once.
 *
 * The mutex is one per minute: a sub-minute task's later runs of a minute find it taken by the
 * master that ran the minute's first (`RunHistory::droverRanEarlierInMinute`), and go on.
 */
final class OneServer
{
    /** Why a master skipped a due time: Laravel's scheduler took it, and runs it. */
    public const TAKEN_BY_LARAVEL = "Laravel's own scheduler took this due time (a cron `schedule:run` or `schedule:work` still runs beside drover) and ran it; remove it from cron (docs/schedule.md, \"Beside cron\")";

    public function __construct(private RunHistory $history)
    {
    }

    /** The due time a master hands its run (`DROVER_SCHEDULE_DUE`, Unix seconds); null for "run now" or an older master. */
    public static function dueFromEnvironment(): ?int
    {
        return self::due(getenv('DROVER_SCHEDULE_DUE'));
    }

    /** A due time as the master writes it (Unix seconds), or null. */
    public static function due(mixed $value): ?int
    {
        return is_string($value) && ctype_digit($value) && strlen($value) <= 12 ? (int) $value : null;
    }

    /**
     * Null when the master may run $event's due time $due (Unix seconds); else why not: Laravel's
     * scheduler took its mutex for that minute.
     */
    public function refusal(Schedule $schedule, Event $event, string $key, int $due): ?string
    {
        // As schedule:run's startedAt: the application's time zone, which the key's minute is in.
        $time = Date::createFromTimestamp($due, date_default_timezone_get());
        if ($schedule->serverShouldRun($event, $time)) {
            return null;
        }
        return $this->history->droverRanEarlierInMinute($key, $due) ? null : self::TAKEN_BY_LARAVEL;
    }
}
