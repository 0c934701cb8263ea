<?php

namespace Drover\Http\Controllers;

use Drover\Dashboard\Actions\ActionLog;
use Drover\Dashboard\Actions\Actor;
use Drover\Dashboard\Actions\ApplyBulkAction;
use Drover\Dashboard\Actions\Preview;
use Drover\Dashboard\Actions\Verb;
use Drover\Dashboard\DashboardDatabase;
use Drover\Dashboard\Limits;
use Drover\Dashboard\Redaction;
use Drover\Dashboard\Repositories\SearchRepository;
use Drover\Dashboard\Search\JobFilter;
use Illuminate\Http\Request;
use Illuminate\Routing\Controller;

/**
 * Acting on all that a search matches (a preview of the count, a confirmation, then the action in
 * the background with its progress), and the audit trail of every action.
 *
 * The preview is the action's bound: it reads the point it is taken at and the count, and hands
 * them to the confirmation form as a signed token (Actions\Preview); the POST acts on that, and
 * only on that — a confirmation without it, or with one altered or expired, is refused (422).
 */
class ActionsController extends Controller
{
    /** The search and verb a request names, or a 422 naming what is wrong. @return array{0: JobFilter, 1: Verb, 2: ?string} */
    private function asked(array $input): array
    {
        [$filter, $problems] = JobFilter::fromQuery($input, new \DateTimeZone((string) config('app.timezone', 'UTC')));
        abort_if($filter === null, 422, 'drover: ' . implode('; ', $problems));
        $verb = Verb::tryFrom(is_string($input['verb'] ?? null) ? $input['verb'] : '');
        abort_if($verb === null, 422, 'drover: verb must be one of ' . implode(', ', array_map(fn (Verb $v) => $v->value, Verb::cases())));
        $to = is_string($input['to'] ?? null) ? trim($input['to']) : null;
        $refusal = $verb->refusal($filter->state, $to);
        abort_if($refusal !== null, 422, "drover: $refusal");
        return [$filter, $verb, $verb->needsQueue() ? $to : null];
    }

    /**
     * The preview: what would be done to how many, and the button that does it — carrying the
     * point the preview was taken at (read before the count) and the count, signed.
     */
    public function confirm(Request $request)
    {
        [$filter, $verb, $to] = $this->asked($request->query());
        $search = new SearchRepository(DashboardDatabase::connection());
        try {
            $point = $search->previewPoint($filter->state);
            $count = $search->count($filter);
        } catch (\Drover\Dashboard\Repositories\SearchUnavailable $e) {
            abort(422, 'drover: ' . $e->getMessage());
        }
        $preview = new Preview($filter->query(), $verb->value, $to, $point['upto'], $point['at'], $point['horizon'], $count[0], $count[1], time());
        return view('drover::confirm', [
            'filter' => $filter,
            'verb' => $verb,
            'to' => $to,
            'count' => $count,
            'preview' => $preview,
            'token' => $preview->token(Preview::key()),
        ]);
    }

    /**
     * The confirmation: the action on what its preview matched, in the background. Its row in
     * the audit trail keeps the search with its free-text filters withheld; those go to the
     * background job only (ApplyBulkAction).
     */
    public function store(Request $request)
    {
        $token = $request->request->get('preview');
        abort_unless(is_string($token) && $token !== '', 422, 'drover: `preview` is missing: a bulk action is confirmed from its preview (the page that counts what it will touch); preview it again from the search');
        try {
            $preview = Preview::fromToken($token, Preview::key(), time());
        } catch (\InvalidArgumentException $e) {
            abort(422, 'drover: `preview` ' . $e->getMessage());
        }
        [$filter, $verb, $to] = $this->asked($preview->search + ['verb' => $preview->verb, 'to' => $preview->to]);
        $target = [
            'search' => Redaction::search($filter->query()),
            'described' => $filter->audited()->describe(),
            'preview' => $preview->record(),
        ] + ($to === null ? [] : ['queue' => $to]);
        $log = new ActionLog(DashboardDatabase::connection());
        $id = $log->request(Actor::of($request), $verb, $target, $preview->exact ? $preview->count : null, $preview->upto);
        ApplyBulkAction::start($id, Redaction::withheld($filter->query()));
        return redirect()->route('drover.action', $id)->with('drover.flash', "{$verb->label()}: started in the background on what the preview matched (" . self::counted($preview->count, $preview->exact) . '), and on nothing else.');
    }

    public function index(Request $request)
    {
        $before = $request->query('before');
        $before = is_string($before) && ctype_digit($before) && strlen($before) <= 18 ? (int) $before : null;
        $actions = (new ActionLog(DashboardDatabase::connection()))->recent(Limits::PAGE + 1, $before);
        $more = count($actions) > Limits::PAGE;
        $actions = array_slice($actions, 0, Limits::PAGE);
        return view('drover::actions', [
            'actions' => $actions,
            'older' => $more ? end($actions)->id : null,
            'days' => config('drover.dashboard.audit_days', ActionLog::DEFAULT_DAYS),
        ]);
    }

    public function show(int $id)
    {
        $log = new ActionLog(DashboardDatabase::connection());
        $action = $log->find($id);
        abort_if($action === null, 404, "drover: action $id is not in the audit trail (it may be older than its retention)");
        [$connection, $queue] = ApplyBulkAction::destination();
        return view('drover::action', [
            'action' => $action,
            'keys' => $log->keys($id, 1000),
            'where' => $connection . ' / ' . ($queue ?? 'its default queue'),
            'refresh' => in_array($action->state, ['requested', 'running'], true) ? 2 : 0,
        ]);
    }

    public static function counted(?int $count, bool $exact): string
    {
        if ($count === null) {
            return 'every matching job (not counted in time)';
        }
        $words = number_format($count) . ' job' . ($count === 1 && $exact ? '' : 's');
        return match (true) {
            $exact => $words,
            $count >= \Drover\Dashboard\Limits::SEARCH_COUNT_CAP => "more than $words",
            default => "at least $words (counted in the time allowed)",
        };
    }
}
