<?php

namespace App\Events;

use Illuminate\Foundation\Events\Dispatchable;

/** An event whose queued listener (App\Listeners\GroupedListener) names an ordered group. */
class GroupedEvent
{
    use Dispatchable;

    public function __construct(public string $group, public string $label)
    {
    }
}
