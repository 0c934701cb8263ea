<?php

namespace App\Jobs;

/** Every option Laravel writes into a payload, as properties (payloads:capture; never run). */
class PayloadOptionsJob extends MatrixJob
{
    public $tries = 3;

    public $maxExceptions = 2;

    public $failOnTimeout = true;

    public $timeout = 7;

    public $backoff = [1, 5, 10];

    public function retryUntil()
    {
        return now()->addMinutes(5);
    }

    protected function run(int $attempt): void
    {
    }
}
