<?php

namespace Drover\Console;

/**
 * `php artisan drover:continue`: hand out jobs again after `drover:pause`; with
 * `--queue=[connection:]queue`, resume that queue on every master (as `queue:resume`).
 */
class ContinueCommand extends ControlCommand
{
    protected $signature = 'drover:continue
        {--pool= : Only this pool (its name in config/drover.php)}
        {--queue= : Instead, resume this queue ([connection:]queue) on every master of the database}';

    protected $description = 'Hand out jobs again after drover:pause';

    public function handle(): int
    {
        $queue = $this->option('queue');
        if (is_string($queue) && $queue !== '') {
            return $this->pauseQueue($queue, false);
        }
        $pool = $this->option('pool');
        if (is_string($pool) && $pool !== '') {
            return $this->send('continue', "drover: pool $pool continuing (its jobs are handed out again)", $pool);
        }
        return $this->send('continue', 'drover: continuing (jobs are handed out again)');
    }
}
