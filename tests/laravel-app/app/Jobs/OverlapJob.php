<?php

namespace App\Jobs;

use Illuminate\Queue\Middleware\WithoutOverlapping;

class OverlapJob extends MatrixJob 
{
    public function middleware()
    {
        return [new WithoutOverlapping("overlap")];
    }

    protected function run(int $attempt): void
    {
    }
}
