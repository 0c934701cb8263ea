<?php

namespace Drover\Http\Controllers;

use Drover\Dashboard\Actions\ActionLog;
use Drover\Dashboard\Actions\Actor;
use Drover\Dashboard\DashboardDatabase;
use Drover\Queue\PauseNotConfirmed;
use Drover\Queue\QueuePauses;
use Illuminate\Http\Request;
use Illuminate\Routing\Controller;

/**
 * Pause and resume a queue by name from the overview, as `queue:pause` / `queue:continue` do
 * (QueuePauses: the pause holds once every master that may hand out its jobs confirmed it).
 */
class QueuesController extends Controller
{
    private function queue(Request $request): string
    {
        $queue = $request->input('queue');
        abort_unless(is_string($queue) && trim($queue) !== '' && mb_strlen($queue) <= 200, 422, 'drover: queue must be the name of a queue');
        return $queue;
    }

    public function pause(Request $request)
    {
        $queue = $this->queue($request);
        $db = DashboardDatabase::connection();
        $log = new ActionLog($db);
        try {
            (new QueuePauses($db))->pause($queue);
            $log->done(Actor::of($request), 'pause', ['queue' => $queue], "queue $queue paused: no master hands out its jobs until it is resumed");
            $flash = "Queue $queue is paused: no worker starts its jobs until it is resumed.";
        } catch (PauseNotConfirmed $e) {
            $log->done(Actor::of($request), 'pause', ['queue' => $queue], $e->getMessage(), false);
            $flash = $e->getMessage();
        }
        return redirect()->route('drover.overview')->with('drover.flash', $flash);
    }

    public function resume(Request $request)
    {
        $queue = $this->queue($request);
        $db = DashboardDatabase::connection();
        $pauses = new QueuePauses($db);
        $resumed = array_key_exists($queue, $pauses->paused());
        $pauses->resume($queue);
        (new ActionLog($db))->done(Actor::of($request), 'resume', ['queue' => $queue], $resumed ? "queue $queue resumed" : "queue $queue was not paused", true, $resumed ? 1 : 0);
        return redirect()->route('drover.overview')->with('drover.flash', $resumed ? "Queue $queue is resumed." : "Queue $queue was not paused.");
    }
}
