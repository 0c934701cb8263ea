<?php

namespace Drover\Console;

use Drover\Control\ControlClient;
use Drover\Control\NotRunning;
use Drover\Control\PermissionDenied;
use Illuminate\Console\Command;

/** The shared part of drover:status, drover:pause, drover:continue and drover:terminate. */
abstract class ControlCommand extends Command
{
    protected function client(): ControlClient
    {
        return new ControlClient((string) ($this->laravel['config']['drover.state_dir'] ?? $this->laravel->storagePath() . '/drover'));
    }

    /** Exit code when no master answers. */
    public const NOT_RUNNING = 2;

    /** Exit code when this user may not use the control socket (a master may be running). */
    public const PERMISSION_DENIED = 4;

    /** Sends a command; exit code 2 when no master runs, 4 when this user may not ask. */
    protected function send(string $command, string $done, ?string $pool = null): int
    {
        try {
            $this->client()->send($command, $pool);
        } catch (NotRunning $e) {
            $this->error($e->getMessage());
            return self::NOT_RUNNING;
        } catch (PermissionDenied $e) {
            $this->error($e->getMessage());
            return self::PERMISSION_DENIED;
        } catch (\RuntimeException $e) {
            // The master refused (e.g. no pool of that name): its reason, exit 1.
            $this->error($e->getMessage());
            return 1;
        }
        $this->info($done);
        return 0;
    }
}
