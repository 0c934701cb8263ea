<?php

namespace Drover\Http\Controllers;

use Drover\Dashboard\Actions\ActionLog;
use Drover\Dashboard\Actions\Actor;
use Drover\Dashboard\Actions\StopRequests;
use Drover\Dashboard\DashboardDatabase;
use Illuminate\Http\Request;
use Illuminate\Routing\Controller;

/**
 * Stop a running job from its page: the master holding it kills exactly the worker running it
 * and settles the job as the operator chose (Dashboard\Actions\StopRequests).
 */
class StopController extends Controller
{
    public function stop(Request $request, int $id)
    {
        $mode = (string) $request->input('mode', 'graceful');
        $outcome = (string) $request->input('outcome', 'fail');
        $db = DashboardDatabase::connection();
        $actor = Actor::of($request);
        try {
            (new StopRequests($db))->request($id, $mode, $outcome, $actor->name);
        } catch (\InvalidArgumentException $e) {
            abort(422, 'drover: ' . $e->getMessage());
        }
        $action = (new ActionLog($db))->done($actor, 'stop', ['job' => $id], "stop asked ($mode, then $outcome)");
        // Its page in the audit trail: the job's own page goes once it is settled.
        return redirect()->route('drover.action', $action)->with('drover.flash', "Job $id: its master was asked to stop it ($mode, then $outcome).");
    }
}
