<?php

namespace Drover\Events;

/**
 * A queue's oldest available job has waited longer than its threshold (`waits` in
 * config/drover.php). Fired by `php artisan drover:long-wait`, which the drover master runs
 * once per cooldown per queue, fleet-wide — as Horizon's `LongWaitDetected`.
 */
class LongWaitDetected
{
    /**
     * @param string $connection the queue connection (its key in `waits`, e.g. `drover`)
     * @param string $queue      the queue
     * @param int    $seconds    how long its oldest job has waited
     * @param string|null $group the ordered group when the longest wait is a job behind its
     *                           group's head (docs/ordered-groups.md); null otherwise
     * @param string|null $key   the limit key when the longest wait is a job waiting for it
     *                           (docs/limits.md); null otherwise
     */
    public function __construct(
        public string $connection,
        public string $queue,
        public int $seconds,
        public ?string $group = null,
        public ?string $key = null,
    ) {
    }
}
