<?php

namespace App\Support;

use App\Jobs\OkJob;

/**
 * Dispatches with Laravel 12's withDeduplicator() (tests/groups.rs). A closure given to it is
 * serialized into the payload, which needs a file it was written in (not `app:eval`'s code).
 */
final class GroupDispatch
{
    public static function closureDeduplicated(string $label): void
    {
        OkJob::dispatch($label)->withDeduplicator(fn ($payload, $queue) => 'same');
    }
}
