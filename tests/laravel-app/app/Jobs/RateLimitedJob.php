<?php

namespace App\Jobs;

use Illuminate\Queue\Middleware\RateLimited;

class RateLimitedJob extends MatrixJob 
{
    public function middleware()
    {
        return [(new RateLimited("matrix"))->dontRelease()];
    }

    protected function run(int $attempt): void
    {
    }
}
