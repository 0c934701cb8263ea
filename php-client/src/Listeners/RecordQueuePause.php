<?php

namespace Drover\Listeners;

use Drover\Queue\QueuePauses;
use Illuminate\Contracts\Foundation\Application;

/**
 * Laravel's QueuePaused and QueueResumed (Laravel 11+: `queue:pause`, `queue:resume`,
 * `Queue::pause()`, `Queue::pauseFor()`) on a drover connection: written to `drover.paused_queues`.
 * A pause returns once every master holds it (Queue\QueuePauses), so `queue:pause` prints its
 * line only then. Laravel keeps its own cache key as well, so `Queue::isPaused()` answers as usual.
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
            $pauses->pause((string) $event->queue, $event->ttl ?? null, $this->sayWaiting(...));
        } else {
            $pauses->resume((string) $event->queue);
        }
    }

    /** On the console while a command waits; in the log from anywhere else. */
    private function sayWaiting(string $line): void
    {
        if ($this->app->runningInConsole()) {
            fwrite(STDERR, $line . "\n");
        } else {
            $this->app['log']->warning($line);
        }
    }
}
