<?php

namespace Drover\Console;

/** `php artisan drover:continue`: hand out jobs again after `drover:pause`. */
class ContinueCommand extends ControlCommand
{
    protected $signature = 'drover:continue';

    protected $description = 'Hand out jobs again after drover:pause';

    public function handle(): int
    {
        return $this->send('continue', 'drover: continuing (jobs are handed out again)');
    }
}
