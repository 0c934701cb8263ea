<?php

namespace App\Jobs;


class ReleasingJob extends MatrixJob 
{
    public $tries = 3;

    protected function run(int $attempt): void
    {
        if ($attempt === 1) {
            $this->release(1);
        }
    }
}
