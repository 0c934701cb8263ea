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
 * and settles the job as the operator chose (Dashboard\Actions\StopRequests). The form names the
 * attempt the page showed (`lease`, its lease token, and `attempt`, its number): a stop of an
 * attempt that has ended is refused (422), never turned into a stop of the next.
 */
class StopController extends Controller
{
    public function stop(Request $request, int $id)
    {
        $mode = self::field($request, 'mode', '/^[a-z]{1,20}$/', 'graceful or kill') ?? 'graceful';
        $outcome = self::field($request, 'outcome', '/^[a-z]{1,20}$/', 'fail or release') ?? 'fail';
        $lease = self::field($request, 'lease', '/^[0-9]{1,18}$/', "the running attempt's lease token, as the job's page shows it");
        abort_if($lease === null, 422, "drover: `lease` is missing: a stop names the attempt it was asked of (the lease token the job's page showed); reload job $id's page and stop it from there");
        $attempt = self::field($request, 'attempt', '/^[0-9]{1,9}$/', "the running attempt's number, as the job's page shows it");
        $db = DashboardDatabase::connection();
        $actor = Actor::of($request);
        try {
            $stopped = (new StopRequests($db))->request($id, $mode, $outcome, $actor->name, (int) $lease, $attempt === null ? null : (int) $attempt);
        } catch (\InvalidArgumentException $e) {
            abort(422, 'drover: ' . $e->getMessage());
        }
        $action = (new ActionLog($db))->done($actor, 'stop', ['job' => $id], "stop of attempt {$stopped['attempt']} (lease {$stopped['token']}) asked ($mode, then $outcome)");
        // Its page in the audit trail: the job's own page goes once it is settled.
        return redirect()->route('drover.action', $action)->with('drover.flash', "Job $id: its master was asked to stop it — attempt {$stopped['attempt']} ($mode, then $outcome).");
    }

    /** A form field: null when absent or empty; a 422 naming it when it is not what it takes. */
    private static function field(Request $request, string $name, string $pattern, string $takes): ?string
    {
        $value = $request->request->get($name);
        if ($value === null || $value === '') {
            return null;
        }
        abort_unless(is_string($value) && preg_match($pattern, $value) === 1, 422, "drover: `$name` must be $takes");
        return $value;
    }
}
