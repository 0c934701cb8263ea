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

    /**
     * `--queue=[connection:]queue`: pauses (`$ttl`: for that many seconds) or resumes that queue by
     * name for every master of the database, as Laravel 11+'s `queue:pause` / `queue:resume` do,
     * and on Laravel 8 too. No master need be running: the state is in the database.
     */
    protected function pauseQueue(string $spec, bool $pause, ?string $for = null): int
    {
        [$connection, $queue] = str_contains($spec, ':') ? explode(':', $spec, 2) : [(string) $this->laravel['config']['queue.default'], $spec];
        $pauses = \Drover\Queue\QueuePauses::forQueueConnection($this->laravel, $connection);
        if ($queue === '' || $pauses === null) {
            $this->error("drover: --queue=$spec names no queue of a drover connection (give [connection:]queue, e.g. drover:default)");
            return 2;
        }
        if ($for !== null && $for !== '' && (!ctype_digit($for) || (int) $for < 1 || strlen($for) > 9)) {
            $this->error("drover: --for must be a whole number of seconds (at least 1), got '$for'");
            return 2;
        }
        $ttl = $for === null || $for === '' ? null : (int) $for;
        $manager = $this->laravel['queue'];
        try {
            if (method_exists($manager, 'pause')) {
                // Laravel 11+: its own pause (cache key and QueuePaused), which drover records
                // (Listeners\RecordQueuePause) and which returns once every master holds it.
                if (!$pause) {
                    $manager->resume($connection, $queue);
                } elseif ($ttl === null) {
                    $manager->pause($connection, $queue);
                } else {
                    $manager->pauseFor($connection, $queue, $ttl);
                }
            } elseif ($pause) {
                $pauses->pause($queue, $ttl, fn (string $line) => $this->warn($line));
            } else {
                $pauses->resume($queue);
            }
        } catch (\Drover\Queue\PauseNotConfirmed $e) {
            $this->error($e->getMessage());
            return 1;
        }
        $this->info(match (true) {
            !$pause => "drover: queue $connection:$queue resumed (every master claims from it again)",
            $ttl === null => "drover: queue $connection:$queue paused until resumed: every master holds it, and no job of it starts from now on (jobs already running finish)",
            default => "drover: queue $connection:$queue paused for {$ttl}s: every master holds it, and no job of it starts until then (jobs already running finish)",
        });
        return 0;
    }

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
