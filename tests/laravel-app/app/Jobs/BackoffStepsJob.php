<?php

namespace App\Jobs;

use App\Support\Journal;
use App\Support\Waits;

/**
 * A $backoff of several steps: throws on attempts 1 and 2, each retry journals how long it waited
 * (Waits::bucket): 1 s after the first failure, 2 s after the second.
 */
class BackoffStepsJob extends MatrixJob
{
    public $tries = 3;

    public $backoff = [1, 2];

    protected function run(int $attempt): void
    {
        $key = "matrix:{$this->label}:failed_at";
        if ($attempt > 1) {
            Journal::record($this->label, Waits::bucket(Waits::since($key)), $attempt);
        }
        if ($attempt < 3) {
            Waits::markFailure($key);
            throw new \RuntimeException("backoff step $attempt");
        }
    }
}
