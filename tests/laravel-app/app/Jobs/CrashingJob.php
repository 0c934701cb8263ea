<?php

namespace App\Jobs;

/** Kills its own worker on every attempt, as a segfaulting extension or the OOM killer would. */
class CrashingJob extends MatrixJob
{
    public $tries = 2;

    protected function run(int $attempt): void
    {
        posix_kill(getmypid(), SIGKILL);
    }
}
