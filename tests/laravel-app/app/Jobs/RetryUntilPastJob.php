<?php

namespace App\Jobs;


class RetryUntilPastJob extends MatrixJob 
{
    public function retryUntil()
    {
        return now()->subSecond();
    }

    protected function run(int $attempt): void
    {
    }
}
