<?php

namespace App\Jobs;


class RetryUntilFutureJob extends MatrixJob 
{
    public $tries = 1;

    public function retryUntil()
    {
        return now()->addMinutes(5);
    }

    protected function run(int $attempt): void
    {
        if ($attempt === 1) {
            throw new \RuntimeException("retried until the deadline, not by tries");
        }
    }
}
