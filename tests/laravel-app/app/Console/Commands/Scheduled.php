<?php

namespace App\Console\Commands;

use App\Console\TestSchedule;
use Illuminate\Console\Command;

// A scheduled command of the scheduler's tests (App\Console\TestSchedule): says its word and
// records that it ran.
class Scheduled extends Command
{
    protected $signature = 'app:scheduled {word}';

    protected $description = 'A command the test schedule runs';

    public function handle(): int
    {
        TestSchedule::record('command');
        $this->line('scheduled says ' . $this->argument('word'));
        return 0;
    }
}
