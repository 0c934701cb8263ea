<?php

namespace App\Jobs;

use Illuminate\Bus\Batchable;

class BatchedJob extends MatrixJob 
{
    use Batchable;

    protected function run(int $attempt): void
    {
    }
}
