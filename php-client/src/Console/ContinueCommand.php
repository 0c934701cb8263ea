<?php

namespace Drover\Console;

/** `php artisan drover:continue`: hand out jobs again after `drover:pause`. */
class ContinueCommand extends ControlCommand
{
    protected $signature = 'drover:continue {--pool= : Only this pool (its name in config/drover.php)}';

    protected $description = 'Hand out jobs again after drover:pause';

    public function handle(): int
    {
        $pool = $this->option('pool');
        if (is_string($pool) && $pool !== '') {
            return $this->send('continue', "drover: pool $pool continuing (its jobs are handed out again)", $pool);
        }
        return $this->send('continue', 'drover: continuing (jobs are handed out again)');
    }
}
