<?php

namespace App\Jobs;


class TimeoutFailJob extends MatrixJob 
{
    public $timeout = 1;

    public $failOnTimeout = true;

    public $tries = 3;

    protected function run(int $attempt): void
    {
        sleep(4);
    }
}
