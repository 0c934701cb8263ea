<?php

namespace App\Jobs;


class SlowJob extends MatrixJob 
{
    protected function run(int $attempt): void
    {
        usleep(200000);
    }
}
