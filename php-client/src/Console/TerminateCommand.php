<?php

namespace Drover\Console;

/** `php artisan drover:terminate`: Stop the drover master gracefully (running jobs finish). */
class TerminateCommand extends ControlCommand
{
    protected $signature = 'drover:terminate';

    protected $description = 'Stop the drover master gracefully (running jobs finish)';

    public function handle(): int
    {
        return $this->send('terminate', 'drover: terminating');
    }
}
