<?php

namespace App\Console\Commands;

use App\Jobs\DemoJob;
use Illuminate\Console\Command;

/** Dispatches COUNT DemoJobs one at a time (each its own INSERT and commit), like web requests do. */
class DispatchDemo extends Command
{
    protected $signature = 'demo:dispatch {count=4000} {ms=10}';

    protected $description = 'Dispatch the demo jobs one at a time; prints the time of the first dispatch';

    public function handle(): int
    {
        $first = microtime(true);
        for ($i = 1; $i <= (int) $this->argument('count'); $i++) {
            DemoJob::dispatch($i, (int) $this->argument('ms'));
        }
        $this->line(sprintf('%.6f', $first));
        return 0;
    }
}
