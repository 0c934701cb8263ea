<?php

namespace Drover\Listeners;

use Drover\Queue\QueuePauses;
use Illuminate\Contracts\Foundation\Application;

/**
 * Laravel's QueuePaused and QueueResumed (Laravel 11+: `queue:pause`, `queue:resume`,
 * `Queue::pause()`, `Queue::pauseFor()`) on a drover connection: written to `drover.paused_queues`,
 * where every master sees it within a second. Laravel keeps its own cache key as well, so
 * `Queue::isPaused()` answers as usual.
 */
final class RecordQueuePause
{
    public function __construct(private readonly Application $app)
    {
    }

    public function __invoke(object $event): void
    {
        $pauses = QueuePauses::forQueueConnection($this->app, $event->connection ?? null);
        if ($pauses === null) {
            return;
        }
        if ($event instanceof \Illuminate\Queue\Events\QueuePaused) {
            $pauses->pause((string) $event->queue, $event->ttl ?? null);
        } else {
            $pauses->resume((string) $event->queue);
        }
    }
}
