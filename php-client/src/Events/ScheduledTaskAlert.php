<?php

namespace Drover\Events;

/**
 * A scheduled task needs attention (docs/schedule.md, "Alerts"): it failed `$failures` times
 * since its last success, or several of its due times passed without one (`$failures` 0). Fired
 * by `php artisan drover:long-wait --task=...`, which the drover master runs once per cooldown
 * per task, fleet-wide; sent like LongWaitDetected (Drover::routeMailNotificationsTo,
 * routeSlackNotificationsTo).
 */
class ScheduledTaskAlert
{
    /**
     * @param string   $task     the task's key (Laravel's mutex name of the event)
     * @param string   $summary  what `schedule:list` shows for it
     * @param int      $failures runs failed since its last success; 0 when it is overdue
     * @param int|null $seconds  seconds since its last success, null when it never succeeded
     */
    public function __construct(
        public string $task,
        public string $summary,
        public int $failures,
        public ?int $seconds = null,
    ) {
    }
}
