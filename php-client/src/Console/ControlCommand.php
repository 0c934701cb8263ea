<?php

namespace Drover\Console;

use Drover\Control\ControlClient;
use Drover\Control\NotRunning;
use Illuminate\Console\Command;

/** The shared part of drover:status, drover:pause, drover:continue and drover:terminate. */
abstract class ControlCommand extends Command
{
    protected function client(): ControlClient
    {
        return new ControlClient((string) ($this->laravel['config']['drover.state_dir'] ?? $this->laravel->storagePath() . '/drover'));
    }

    /** Sends a command; exit code 2 when no master runs. */
    protected function send(string $command, string $done): int
    {
        try {
            $this->client()->send($command);
        } catch (NotRunning $e) {
            $this->error($e->getMessage());
            return 2;
        }
        $this->info($done);
        return 0;
    }
}
