<?php

namespace Drover\Schedule;

use Illuminate\Console\Scheduling\Event;

/**
 * `->droverCatchUp()` on a scheduled event (a macro the package adds): after the whole fleet was
 * down, the event's latest due time missed runs once when a master is back, instead of only being
 * recorded as missed (Laravel's and cron's way, drover's default). docs/schedule.md.
 */
final class CatchUp
{
    /** @var \WeakMap<Event, true>|null the events that asked */
    private static ?\WeakMap $events = null;

    /** Adds the macro (the package's service provider, once). */
    public static function register(): void
    {
        if (Event::hasMacro('droverCatchUp')) {
            return;
        }
        Event::macro('droverCatchUp', function () {
            /** @var Event $this */
            CatchUp::mark($this);
            return $this;
        });
    }

    public static function mark(Event $event): void
    {
        self::$events ??= new \WeakMap();
        self::$events[$event] = true;
    }

    public static function wants(Event $event): bool
    {
        return self::$events !== null && isset(self::$events[$event]);
    }
}
