<?php

namespace App\Jobs;

use Illuminate\Contracts\Queue\ShouldBeUniqueUntilProcessing;

/**
 * ShouldBeUniqueUntilProcessing: a second dispatch before the job starts is dropped, but the lock
 * is released as it starts, so the copy its run dispatches (`$again`) is queued and runs.
 */
class UniqueUntilProcessingJob extends MatrixJob implements ShouldBeUniqueUntilProcessing
{
    public function __construct(string $label, public bool $again = false)
    {
        parent::__construct($label);
    }

    public function uniqueId()
    {
        return 'until-processing';
    }

    protected function run(int $attempt): void
    {
        if ($this->again) {
            static::dispatch($this->label)->onConnection($this->job->getConnectionName());
        }
    }
}
