<?php

namespace Drover\Console;

use Drover\Control\FleetRestartRequests;
use Drover\Dashboard\Repositories\NodeRepository;
use Illuminate\Support\Facades\DB;

/**
 * `php artisan drover:restart`: for deploy scripts. The master re-reads config/drover.php and
 * replaces its workers one by one with the new code; no job is lost or failed, and each pool keeps
 * at least all but one of its workers serving throughout.
 *
 * With `--fleet`, every master of the database, one host at a time: each is asked through its
 * node row (`drover.request_reload`, which a master reads on NOTIFY and at every reap pass), and
 * the next only once it said it reloaded and its status shows every worker replaced and serving.
 * A host that does not get there within `--timeout` seconds stops the roll, named (exit 1);
 * masters of drover 0.1 cannot be asked and are named (restart them on their host).
 */
class RestartCommand extends ControlCommand
{
    protected $signature = 'drover:restart
        {--fleet : Every master of the database, host by host}
        {--timeout=300 : With --fleet, seconds each host may take}';

    protected $description = 'Replace the drover workers one by one with new code and configuration (rolling)';

    public function handle(): int
    {
        if ($this->option('fleet')) {
            return $this->fleet();
        }
        return $this->send('restart', 'drover: restarting the workers one by one');
    }

    private function fleet(): int
    {
        // The dashboard's connection (drover.dashboard.database): an operator's, where roles
        // are split (docs/postgres-roles.md).
        $connection = config('drover.dashboard.database') ?: (config('drover.database') ?: config('database.default'));
        $db = DB::connection($connection);
        $timeout = (float) $this->option('timeout');
        if (!is_finite($timeout) || $timeout <= 0) {
            $this->error("drover: --timeout must be a number of seconds above 0, got {$this->option('timeout')}");
            return 1;
        }
        $nodes = array_filter(
            (new NodeRepository($db))->nodes(),
            fn ($n) => (float) $n->silent_secs <= 2 * (float) $n->lease_secs,
        );
        if ($nodes === []) {
            $this->error("drover: no drover master answers on database connection $connection (no node row heard from within two leases)");
            return self::NOT_RUNNING;
        }
        $requests = new FleetRestartRequests($db);
        foreach ($nodes as $node) {
            $name = sprintf('%s (node %d, pid %d)', $node->hostname, $node->id, $node->pid);
            if ($node->release === null) {
                $this->warn("drover: $name runs drover 0.1, which cannot be asked from here: run `php artisan drover:restart` on that host");
                continue;
            }
            $started = hrtime(true);
            $request = $requests->ask((int) $node->id);
            if ($request === null) {
                $this->warn("drover: $name left before it could be asked");
                continue;
            }
            $this->line("drover: $name: asked to reload (request $request)");
            $problem = $this->waitReplaced($requests, (int) $node->id, $request, $timeout);
            if ($problem !== null) {
                $this->error("drover: $name did not finish its reload ($problem, after " . round((hrtime(true) - $started) / 1e9, 1) . "s; --timeout={$timeout}). The hosts after it were not asked; see its log (journalctl -u drover@APP) and `php artisan drover:status --fleet`");
                return 1;
            }
            $this->info(sprintf('drover: %s: every worker replaced and serving, in %.1fs', $name, (hrtime(true) - $started) / 1e9));
        }
        return 0;
    }

    /**
     * Waits until master $node answered request $request and a status it wrote since shows every
     * worker of every pool at its pool's new generation, the pool serving in full. Null when it
     * did, else what was last seen.
     */
    private function waitReplaced(FleetRestartRequests $requests, int $node, int $request, float $timeout): ?string
    {
        $deadline = hrtime(true) + (int) ($timeout * 1e9);
        $answeredAt = null;
        $seen = 'no answer yet';
        while (hrtime(true) < $deadline) {
            $row = $requests->answer($node, $answeredAt);
            if ($row === null) {
                return 'its node row is gone (the master stopped)';
            }
            if ($answeredAt === null) {
                if ((int) $row->reload_done >= $request) {
                    $answeredAt = $row->now;
                    $seen = 'reloaded; waiting for a status written since';
                }
            } elseif ($row->fresh && $row->status !== null) {
                $status = json_decode($row->status, true) ?: [];
                // A status made after the reload was applied says so (one made before it could
                // land later, from the side connection).
                if ((int) ($status['fleet_restart_answered'] ?? 0) >= $request) {
                    $seen = self::unreplaced($status);
                    if ($seen === null) {
                        return null;
                    }
                }
            }
            usleep(200_000);
        }
        return $seen;
    }

    /** What in a status document is not yet replaced and serving, or null when all is. */
    public static function unreplaced(array $status): ?string
    {
        foreach ($status['pools'] ?? [] as $pool) {
            if (!empty($pool['retired'])) {
                continue;
            }
            $old = array_filter($pool['workers'] ?? [], fn ($w) => ($w['generation'] ?? 0) < ($pool['generation'] ?? 0));
            if ($old !== []) {
                return sprintf('pool %s: %d worker(s) of the previous generation', $pool['name'], count($old));
            }
            if (($pool['serving'] ?? 0) < ($pool['processes'] ?? 0)) {
                return sprintf('pool %s: %d of %d workers serving', $pool['name'], $pool['serving'] ?? 0, $pool['processes'] ?? 0);
            }
        }
        return null;
    }
}
