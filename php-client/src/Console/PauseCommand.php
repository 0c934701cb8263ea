<?php

namespace Drover\Console;

/**
 * `php artisan drover:pause`: stop handing out jobs (running jobs finish); with `--pool=NAME`,
 * only that pool's (as Horizon's `horizon:pause-supervisor`); with `--queue=[connection:]queue`,
 * that queue on every master (as Laravel 11+'s `queue:pause`, on any Laravel).
 */
class PauseCommand extends ControlCommand
{
    protected $signature = 'drover:pause
        {--pool= : Only this pool (its name in config/drover.php)}
        {--queue= : Instead, pause this queue ([connection:]queue) on every master of the database}
        {--for= : With --queue: for this many seconds (then it resumes by itself)}';

    protected $description = 'Stop handing out jobs (running jobs finish)';

    public function handle(): int
    {
        $queue = $this->option('queue');
        if (is_string($queue) && $queue !== '') {
            return $this->pauseQueue($queue, true, $this->option('for'));
        }
        $pool = $this->option('pool');
        if (is_string($pool) && $pool !== '') {
            return $this->send('pause', "drover: pool $pool paused", $pool);
        }
        return $this->send('pause', 'drover: paused');
    }
}
