<?php

namespace Drover\Console;

/** `php artisan drover:pause`: Stop handing out jobs (running jobs finish). */
class PauseCommand extends ControlCommand
{
    protected $signature = 'drover:pause';

    protected $description = 'Stop handing out jobs (running jobs finish)';

    public function handle(): int
    {
        return $this->send('pause', 'drover: paused');
    }
}
