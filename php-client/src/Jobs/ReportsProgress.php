<?php

namespace Drover\Jobs;

/**
 * A running job's progress (docs/workflows.md, "Progress"), for any job class that uses Laravel's
 * InteractsWithQueue, in a workflow or not:
 *
 *     $this->progress(40, 'parsed 4,000 rows');
 *
 * Shown live on the job's page and its workflow's in the console. Call it as often as is
 * convenient: at most one report a second per job is written (the first and 100 % always).
 * Outside a drover worker (the sync driver, another queue connection, a test calling handle()) it
 * checks its arguments and writes nothing.
 */
trait ReportsProgress
{
    /**
     * Reports $percent done (0 to 100), with a short $note (at most 500 characters are kept).
     * Whether it was written: false when throttled, outside a drover worker, or when the job's
     * lease was taken back.
     *
     * @throws \InvalidArgumentException for a percentage outside 0..100
     */
    public function progress(int $percent, ?string $note = null): bool
    {
        return Progress::report($this->job ?? null, $percent, $note, static::class);
    }
}
