<?php

namespace Drover\Console;

/** `php artisan drover:continue`: Hand out jobs again after drover. */
class ContinueCommand extends ControlCommand
{
    protected $signature = 'drover:continue';

    protected $description = 'Hand out jobs again after drover';

    public function handle(): int
    {
        return $this->send('continue', 'drover: pause:continuing');
    }
}
