<?php

namespace Drover\Console;

/**
 * `php artisan drover:pause`: stop handing out jobs (running jobs finish); with `--pool=NAME`,
 * only that pool's (as Horizon's `horizon:pause-supervisor`).
 */
class PauseCommand extends ControlCommand
{
    protected $signature = 'drover:pause {--pool= : Only this pool (its name in config/drover.php)}';

    protected $description = 'Stop handing out jobs (running jobs finish)';

    public function handle(): int
    {
        $pool = $this->option('pool');
        if (is_string($pool) && $pool !== '') {
            return $this->send('pause', "drover: pool $pool paused", $pool);
        }
        return $this->send('pause', 'drover: paused');
    }
}
