<?php

namespace App\Jobs;

/**
 * Fails until the file `door-open` exists in the app's storage: a failed job the dashboard's retry
 * button can then run to completion.
 */
class DoorJob extends MatrixJob
{
    public $tries = 1;

    protected function run(int $attempt): void
    {
        if (!file_exists(storage_path('door-open'))) {
            throw new \RuntimeException('the door is closed');
        }
    }
}
