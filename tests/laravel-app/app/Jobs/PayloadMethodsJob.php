<?php

namespace App\Jobs;

/**
 * The options Laravel also reads from methods (payloads:capture; never run): tries() (Laravel 12
 * only: Laravel 8 reads the property alone) and backoff() with a DateTime step.
 */
class PayloadMethodsJob extends MatrixJob
{
    public function tries()
    {
        return 4;
    }

    public function backoff()
    {
        return [2, now()->addSeconds(20)];
    }

    protected function run(int $attempt): void
    {
    }
}
