<?php

namespace App\Jobs;


class OkJob extends MatrixJob 
{
    protected function run(int $attempt): void
    {
    }
}
