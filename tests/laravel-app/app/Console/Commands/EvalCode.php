<?php

namespace App\Console\Commands;

use Illuminate\Console\Command;

// Stand-in for `php artisan tinker`, which Debian does not package.
class EvalCode extends Command
{
    protected $signature = 'app:eval {code : PHP code run inside the booted application}';

    protected $description = 'Evaluate PHP code inside the booted application';

    public function handle(): int
    {
        $result = eval($this->argument('code'));
        if ($result !== null) {
            $this->line(is_string($result) ? $result : json_encode($result));
        }
        return 0;
    }
}
