<?php

namespace Drover\Http\Controllers;

use Drover\Dashboard\Actions\ActionLog;
use Drover\Dashboard\Actions\Actor;
use Drover\Dashboard\Actions\PoolSizes;
use Drover\Dashboard\DashboardDatabase;
use Drover\Dashboard\Repositories\NodeRepository;
use Illuminate\Http\Request;
use Illuminate\Routing\Controller;

/**
 * Restart one master from the overview, wherever it runs, as `php artisan drover:restart` does on
 * its host: it re-reads config/drover.php and replaces its workers one by one with the new code
 * (`drover.request_reload`, which the master hears at once and at every reap pass). For the
 * whole fleet host by host, `php artisan drover:restart --fleet`.
 */
class MastersController extends Controller
{
    public function restart(Request $request, int $node)
    {
        $db = DashboardDatabase::connection();
        $nodes = new NodeRepository($db);
        $row = $nodes->find($node);
        abort_if($row === null, 404, "drover: no master with node id $node is registered (it stopped, or its row was removed)");
        abort_if($row->release === null, 422, "drover: the master on {$row->hostname} runs drover 0.1, which cannot be asked from here: run `php artisan drover:restart` on that host");
        $nodes->requestReload($node);
        (new ActionLog($db))->done(Actor::of($request), 'restart', ['master' => "{$row->hostname} (node $node, pid {$row->pid})"], "master on {$row->hostname} asked to replace its workers one by one");
        return redirect()->route('drover.overview')->with('drover.flash', "The master on {$row->hostname} (node $node) was asked to restart its workers one by one.");
    }

    /** Sets one of a master's pools to a number of processes (until its next reload). */
    public function poolSize(Request $request, int $node)
    {
        $pool = (string) $request->input('pool', '');
        $db = DashboardDatabase::connection();
        $actor = Actor::of($request);
        try {
            $processes = (new PoolSizes($db))->set($node, $pool, $request->input('processes'), $actor->name);
        } catch (\InvalidArgumentException $e) {
            abort(422, 'drover: ' . $e->getMessage());
        }
        (new ActionLog($db))->done($actor, 'pool-size', ['pool' => $pool, 'master' => "node $node", 'processes' => $processes], "pool $pool of node $node set to $processes processes (until its next reload)");
        return redirect()->route('drover.overview')->with('drover.flash', "Pool $pool was set to $processes processes; its master applies it at once (until its next reload).");
    }
}
