<?php

namespace App\Jobs;


class FlakyJob extends MatrixJob 
{
    public $tries = 3;

    public $backoff = 1;

    protected function run(int $attempt): void
    {
        if ($attempt === 1) {
            throw new \RuntimeException("flaky on attempt 1");
        }
    }
}
