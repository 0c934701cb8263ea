<?php

namespace App\Jobs;


class TimeoutRetryJob extends MatrixJob 
{
    public $timeout = 1;

    public $tries = 2;

    public $backoff = 1;

    protected function run(int $attempt): void
    {
        if ($attempt === 1) {
            sleep(4);
        }
    }
}
