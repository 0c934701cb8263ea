<?php

namespace App\Jobs;

use Illuminate\Queue\Middleware\ThrottlesExceptions;

class ThrottledJob extends MatrixJob 
{
    public $tries = 2;

    public function middleware()
    {
        return [new ThrottlesExceptions(10, 1)];
    }

    protected function run(int $attempt): void
    {
        throw new \RuntimeException("throttled failure");
    }
}
