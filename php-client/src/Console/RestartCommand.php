<?php

namespace Drover\Console;

/**
 * `php artisan drover:restart`: for deploy scripts. The master re-reads config/drover.php and
 * replaces its workers one by one with the new code; no job is lost or failed, and each pool keeps
 * at least all but one of its workers serving throughout.
 */
class RestartCommand extends ControlCommand
{
    protected $signature = 'drover:restart';

    protected $description = 'Replace the drover workers one by one with new code and configuration (rolling)';

    public function handle(): int
    {
        return $this->send('restart', 'drover: restarting the workers one by one');
    }
}
