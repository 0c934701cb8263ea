<?php

namespace Drover\Console;

use Drover\Control\NotRunning;
use Drover\Control\PermissionDenied;
use Drover\Control\StatusLines;
use Drover\Dashboard\Repositories\NodeRepository;
use Illuminate\Support\Facades\DB;

/**
 * `php artisan drover:status`: pools and workers of the running master. Exit codes as `drover
 * status`: the master's own verdict — 0 serving, 1 paused, 3 degraded (a circuit open, a pool with
 * no worker serving), 5 degraded because its database is unreachable — or 2 when no master
 * answers and 4 when this user may not ask.
 *
 * With `--fleet`, every master of the database (every host), from the status each writes into its
 * row of drover.nodes at every heartbeat: the worst verdict among them, 3 when one has been silent
 * for longer than two of its leases, and 2 when there is none.
 */
class StatusCommand extends ControlCommand
{
    protected $signature = 'drover:status {--json : Print the master\'s answer as JSON} {--fleet : Every master of the database, every host}';

    protected $description = 'Show the drover master\'s pools and workers';

    public function handle(): int
    {
        if ($this->option('fleet')) {
            return $this->fleet();
        }
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

    private function fleet(): int
    {
        // The dashboard's connection (drover.dashboard.database): an operator's, where roles
        // are split (docs/postgres-roles.md).
        $connection = config('drover.dashboard.database') ?: (config('drover.database') ?: config('database.default'));
        $nodes = (new NodeRepository(DB::connection($connection)))->nodes();
        if ($this->option('json')) {
            $this->line(json_encode(array_map(fn ($n) => [
                'node' => (int) $n->id, 'hostname' => $n->hostname, 'pid' => (int) $n->pid,
                'release' => $n->release, 'silent_secs' => (float) $n->silent_secs, 'status' => $n->status,
            ], $nodes), JSON_UNESCAPED_SLASHES | JSON_THROW_ON_ERROR));
        }
        if ($nodes === []) {
            $this->error('no drover master has a row in drover.nodes on database connection ' . $connection);
            return self::NOT_RUNNING;
        }
        $worst = 0;
        foreach ($nodes as $node) {
            $silent = $node->silent;
            $code = $silent ? 3 : (is_array($node->status) ? StatusLines::exitCode($node->status) : 0);
            $worst = max($worst, $code);
            if ($this->option('json')) {
                continue;
            }
            $this->line(sprintf(
                '%s (node %d, pid %d, drover %s): heard from %.0fs ago%s',
                $node->hostname, $node->id, $node->pid, $node->release ?? '0.1',
                (float) $node->silent_secs, $silent ? ' — SILENT for more than two leases' : '',
            ));
            foreach (is_array($node->status) ? StatusLines::of($node->status) : [] as $entry) {
                match ($entry[0]) {
                    'error' => $this->error('  ' . $entry[1]),
                    'table' => $this->table($entry[1], $entry[2]),
                    default => $this->line('  ' . $entry[1]),
                };
            }
        }
        return $worst;
    }
}
