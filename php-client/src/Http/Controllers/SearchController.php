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
        if ($filter !== null && !\Drover\Http\Middleware\AuthorizeOperate::allows($request)) {
            // Text reads whole payloads and exceptions, what the dashboard redacts included: a
            // match would tell a secret one guess at a time.
            $refused = array_values(array_filter(\Drover\Dashboard\Redaction::WITHHELD_FILTERS, fn (string $name) => $filter->has($name)));
            if ($refused !== []) {
                [$filter, $problems] = [null, array_map(fn (string $name) => "$name searches " . ($name === 'text' ? 'whole payloads' : 'whole exceptions') . ', what the dashboard redacts included, so it is for those the operateDrover gate allows', $refused)];
            }
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
