<?php

namespace Drover\Console;

use Drover\Control\NotRunning;
use Drover\Control\PermissionDenied;
use Drover\Control\StatusLines;

/**
 * `php artisan drover:status`: pools and workers of the running master. Exit codes as `drover
 * status`: the master's own verdict — 0 serving, 1 paused, 3 degraded (a circuit open, a pool with
 * no worker serving) — or 2 when no master answers and 4 when this user may not ask.
 */
class StatusCommand extends ControlCommand
{
    protected $signature = 'drover:status {--json : Print the master\'s answer as JSON}';

    protected $description = 'Show the drover master\'s pools and workers';

    public function handle(): int
    {
        $client = $this->client();
        try {
            $status = $client->send('status');
        } catch (NotRunning $e) {
            $this->error($e->getMessage());
            return self::NOT_RUNNING;
        } catch (PermissionDenied $e) {
            $this->error($e->getMessage());
            return self::PERMISSION_DENIED;
        }
        if ($this->option('json')) {
            $this->line($client->lastAnswerJson());
        } else {
            foreach (StatusLines::of($status) as $entry) {
                match ($entry[0]) {
                    'error' => $this->error($entry[1]),
                    'table' => $this->table($entry[1], $entry[2]),
                    default => $this->line($entry[1]),
                };
            }
        }
        return StatusLines::exitCode($status);
    }
}
