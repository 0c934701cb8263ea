<?php

namespace Drover\Http\Controllers;

use Drover\Dashboard\Actions\Verb;
use Drover\Dashboard\DashboardDatabase;
use Drover\Dashboard\Repositories\SearchRepository;
use Drover\Dashboard\Repositories\SearchUnavailable;
use Drover\Dashboard\Search\JobFilter;
use Drover\Dashboard\Search\State;
use Illuminate\Http\Request;
use Illuminate\Routing\Controller;

/**
 * The console's search (`/drover/search`): every state, every filter in the URL, a count that is
 * exact or says it is not, a page of matches with the next page's link, and — for those the
 * operateDrover gate allows — what may be done to all of them.
 */
class SearchController extends Controller
{
    public function index(Request $request)
    {
        [$filter, $problems] = JobFilter::fromQuery($request->query(), new \DateTimeZone((string) config('app.timezone', 'UTC')));
        if ($filter !== null && $filter->has('text') && !\Drover\Http\Middleware\AuthorizeOperate::allows($request)) {
            // Text reads whole payloads, redacted fields included: a match would tell a secret.
            [$filter, $problems] = [null, ['text searches whole payloads, fields the dashboard redacts included, so it is for those the operateDrover gate allows']];
        }
        $rows = [];
        $next = null;
        $partial = false;
        $count = [0, true];
        $unavailable = null;
        if ($filter !== null) {
            $after = $request->query('after');
            $after = is_string($after) && $after !== '' && strlen($after) <= 64 ? $after : null;
            $repo = new SearchRepository(DashboardDatabase::connection());
            try {
                [$rows, $next, $partial] = $repo->page($filter, $after);
                $count = $repo->count($filter);
            } catch (SearchUnavailable $e) {
                $unavailable = $e->getMessage();
            }
        }
        $state = $filter?->state ?? (State::tryFrom((string) $request->query('state')) ?? State::Pending);
        return view('drover::search', [
            'filter' => $filter,
            'state' => $state,
            'input' => array_map(fn ($v) => is_string($v) ? $v : '', $request->query()),
            'problems' => $problems,
            'rows' => $rows,
            'next' => $next,
            'partial' => $partial,
            'count' => $count,
            'unavailable' => $unavailable,
            'verbs' => Verb::for($state),
        ]);
    }
}
