<?php

namespace App\Jobs;


class FailingJob extends MatrixJob 
{
    public $tries = 2;

    public $backoff = [1];

    protected function run(int $attempt): void
    {
        throw new \LogicException("always fails");
    }
}
