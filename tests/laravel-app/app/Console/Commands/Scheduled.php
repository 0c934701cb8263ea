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
        $word = (string) $this->argument('word');
        TestSchedule::record($word === 'hello' ? 'command' : "command-$word");
        $this->line('scheduled says ' . $word);
        return 0;
    }
}
