<?php

namespace Drover\Http\Controllers;

use Drover\Dashboard\Actions\ActionLog;
use Drover\Dashboard\Actions\Actor;
use Drover\Dashboard\DashboardDatabase;
use Drover\Dashboard\Repositories\FailedJobRepository;
use Illuminate\Http\Request;
use Illuminate\Routing\Controller;
use Illuminate\Support\Facades\Artisan;

/**
 * Failed jobs, from Laravel's own failer (FailedJobRepository): list, detail with exception and
 * stack, retry (`queue:retry`) and forget (`queue:forget`) — the same paths as the artisan
 * commands.
 */
class FailedJobsController extends Controller
{
    public function index()
    {
        return view('drover::failed', ['failed' => (new FailedJobRepository())->failed()]);
    }

    public function show(string $id)
    {
        $failed = (new FailedJobRepository())->find($id);
        abort_if($failed === null, 404, "drover: failed job $id is not in failed_jobs");
        return view('drover::failed-job', ['failed' => $failed]);
    }

    public function retry(Request $request, string $id)
    {
        abort_if(app('queue.failer')->find($id) === null, 404, "drover: failed job $id is not in failed_jobs");
        Artisan::call('queue:retry', ['id' => [$id]]);
        (new ActionLog(DashboardDatabase::connection()))->done(Actor::of($request), 'retry', ['failed' => $id], "failed job $id pushed back onto its queue");
        return redirect()->route('drover.failed')->with('drover.flash', "Failed job $id was pushed back onto its queue.");
    }

    public function forget(Request $request, string $id)
    {
        $forgotten = app('queue.failer')->forget($id);
        (new ActionLog(DashboardDatabase::connection()))->done(Actor::of($request), 'forget', ['failed' => $id], $forgotten ? "failed job $id forgotten" : "failed job $id was not found", true, $forgotten ? 1 : 0);
        return redirect()->route('drover.failed')->with('drover.flash', $forgotten ? "Failed job $id was forgotten." : "Failed job $id was not found.");
    }
}
