<?php

namespace App\Listeners;

use App\Events\GroupedEvent;
use App\Support\Journal;
use Illuminate\Contracts\Queue\ShouldQueue;

/**
 * A queued listener with an ordered group (Laravel 12 propagates a listener's messageGroup() to
 * its queued job): journals `group_start` and `group_end` around 15 ms, as App\Jobs\GroupJob.
 */
class GroupedListener implements ShouldQueue
{
    public function messageGroup(GroupedEvent $event): string
    {
        return $event->group;
    }

    public function handle(GroupedEvent $event): void
    {
        Journal::record($event->label, 'group_start', 1);
        usleep(15_000);
        Journal::record($event->label, 'group_end', 1);
    }
}
