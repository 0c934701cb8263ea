<?php

namespace Drover\Http\Controllers;

use Drover\Dashboard\Actions\ActionLog;
use Drover\Dashboard\Actions\Actor;
use Drover\Dashboard\DashboardDatabase;
use Drover\Dashboard\Limits;
use Drover\Dashboard\Repositories\FailedJobRepository;
use Drover\Dashboard\Repositories\WorkflowActionRepository;
use Drover\Dashboard\Repositories\WorkflowRepository;
use Drover\Dashboard\Workflows\GraphLayout;
use Drover\Dashboard\Workflows\GraphSvg;
use Drover\Dashboard\Workflows\WorkflowFilter;
use Drover\Dashboard\Workflows\WorkflowPage;
use Illuminate\Http\Request;
use Illuminate\Routing\Controller;

/**
 * Workflows (docs/workflows.md): the list and its search by a name's prefix, state and age,
 * newest first a page at a time; a workflow's page — its graph drawn on the server, each node's
 * state, timing, steps, progress, result size and errors, reloading while it runs; and, for
 * those the operateDrover gate allows, retry a failed step, cancel the workflow, send it a
 * signal. Each action is recorded in the audit trail.
 */
class WorkflowsController extends Controller
{
    /** The longest JSON a signal takes (drover.workflow_signals.data). */
    private const MAX_SIGNAL_DATA = 1048576;

    public function index(Request $request)
    {
        [$filter, $problems] = WorkflowFilter::fromQuery($request->query());
        $rows = [];
        $next = null;
        if ($filter !== null) {
            $after = $request->query('after');
            $after = is_string($after) && $after !== '' && strlen($after) <= 64 ? $after : null;
            [$rows, $next] = (new WorkflowRepository(DashboardDatabase::connection()))->page($filter, $after);
        }
        return view('drover::workflows', [
            'filter' => $filter,
            'problems' => $problems,
            'input' => array_map(fn ($v) => is_string($v) ? $v : '', $request->query()),
            'rows' => $rows,
            'next' => $next,
        ]);
    }

    public function show(int $id)
    {
        $db = DashboardDatabase::connection();
        $repo = new WorkflowRepository($db);
        $workflow = $this->find($repo, $id);
        $nodes = $repo->nodes($id, Limits::WORKFLOW_NODES);
        $counts = $repo->stepCounts($id);
        $failedNodes = array_values(array_map('strval', array_keys(array_filter($counts, fn (object $c) => (int) $c->failed > 0))));
        $failed = $repo->failedSteps($id, $failedNodes, Limits::WORKFLOW_STEPS_LISTED);
        $uuids = [];
        foreach ($failed as $steps) {
            foreach ($steps as $step) {
                if ($step->uuid !== null) {
                    $uuids[] = (string) $step->uuid;
                }
            }
        }
        $signals = $repo->signals($id);
        $running = $repo->runningSteps($id, Limits::WORKFLOW_STEPS_LISTED);
        $shown = WorkflowPage::nodes(
            $nodes,
            $counts,
            $running,
            $failed,
            (new FailedJobRepository())->byUuids($uuids),
            $repo->summaries(array_values(array_filter(array_map(fn (object $n) => $n->sub_wf === null ? null : (int) $n->sub_wf, $nodes)))),
            array_map(fn (object $s) => (string) $s->name, $signals),
            new \DateTimeImmutable(),
            (string) $workflow->state,
        );
        $graph = GraphSvg::svg(
            GraphLayout::of(array_map(fn (object $n) => ['name' => $n->name, 'deps' => $n->deps], $shown)),
            WorkflowPage::boxes($shown),
            "The graph of workflow {$workflow->name}"
        );
        $live = in_array($workflow->state, ['pending', 'running'], true);
        // The workflow's own steps (a sub-workflow's are counted on its page), every node's.
        $steps = ['completed' => 0, 'failed' => 0, 'running' => 0];
        foreach ($counts as $c) {
            $steps['completed'] += (int) $c->completed;
            $steps['failed'] += (int) $c->failed;
        }
        foreach ($running as $listed) {
            $steps['running'] += (int) $listed[0]->running;
        }
        return view('drover::workflow', [
            'workflow' => $workflow,
            'nodes' => $shown,
            'graph' => $graph,
            'signals' => $signals,
            'steps' => $steps,
            'live' => $live,
            'retryable' => in_array($workflow->state, ['running', 'failed'], true),
            'refresh' => $live ? config('drover.dashboard.refresh', 5) : 0,
        ]);
    }

    public function cancel(Request $request, int $id)
    {
        $db = DashboardDatabase::connection();
        $workflow = $this->find(new WorkflowRepository($db), $id);
        // drover.workflow_cancel of a sub-workflow alone ends nothing in its parent: the parent's
        // node would run on, and the parent never end.
        abort_if($workflow->parent !== null, 422, "drover: workflow $id is a sub-workflow of workflow {$workflow->parent}: cancel workflow {$workflow->parent}, which cancels it too");
        $cancelled = (new WorkflowActionRepository($db))->cancel($id);
        $outcome = $cancelled
            ? "workflow $id “{$workflow->name}” cancelled: what had not run is cancelled, its running steps finish"
            : "workflow $id “{$workflow->name}” was not cancelled: it had ended ({$workflow->state})";
        (new ActionLog($db))->done(Actor::of($request), 'cancel-workflow', ['workflow' => $id, 'name' => $workflow->name], $outcome, $cancelled, $cancelled ? 1 : 0);
        return redirect()->route('drover.workflow', $id)->with('drover.flash', ucfirst($outcome) . '.');
    }

    public function retryStep(Request $request, int $id, int $step)
    {
        $db = DashboardDatabase::connection();
        $repo = new WorkflowRepository($db);
        $workflow = $this->find($repo, $id);
        $row = $repo->step($id, $step);
        abort_if($row === null, 404, "drover: job $step is not a step of workflow $id");
        $retried = (new WorkflowActionRepository($db))->retryStep($step);
        if ($retried && $row->uuid !== null) {
            // As queue:retry does: the failer forgets the failed job once it is back on its
            // queue (the step keeps its payload, so its uuid).
            $failed = (new FailedJobRepository())->byUuids([(string) $row->uuid])[(string) $row->uuid] ?? null;
            if ($failed !== null) {
                app('queue.failer')->forget($failed->key);
            }
        }
        $what = "step $step (node “{$row->node}”" . ((int) $row->member > 0 ? ', member ' . (int) $row->member : '') . ") of workflow $id “{$workflow->name}”";
        $outcome = $retried
            ? "$what pushed back onto its queue: its node runs again, and what its failure cancelled waits for it"
            : "$what was not retried: it is not failed ({$row->state}), or its workflow is {$workflow->state}";
        (new ActionLog($db))->done(Actor::of($request), 'retry-step', ['workflow' => $id, 'name' => $workflow->name, 'step' => $step, 'node' => $row->node], $outcome, $retried, $retried ? 1 : 0);
        return redirect()->route('drover.workflow', $id)->with('drover.flash', ucfirst($outcome) . '.');
    }

    /** The form that sends a signal (its own page: the workflow's reloads while it runs). */
    public function signalForm(Request $request, int $id)
    {
        $workflow = $this->find(new WorkflowRepository(DashboardDatabase::connection()), $id);
        $name = $request->query('name');
        return view('drover::workflow-signal', [
            'workflow' => $workflow,
            'name' => is_string($name) ? $name : '',
            'data' => '',
            'problems' => [],
        ]);
    }

    public function signal(Request $request, int $id)
    {
        $db = DashboardDatabase::connection();
        $repo = new WorkflowRepository($db);
        $workflow = $this->find($repo, $id);
        $name = $request->request->get('name');
        $name = is_string($name) ? trim($name) : '';
        $data = $request->request->get('data');
        $data = is_string($data) ? trim($data) : '';
        $problems = [];
        if ($name === '' || mb_strlen($name) > 200) {
            $problems[] = '`name` must be the signal\'s name, 1 to 200 characters (what the nodes wait for: ->add(…, signal: \'approved\'))';
        }
        if ($data !== '') {
            json_decode($data);
            if (json_last_error() !== JSON_ERROR_NONE) {
                $problems[] = '`data` must be JSON (such as {"by": "ana"}), or empty for none: ' . json_last_error_msg();
            } elseif (strlen($data) > self::MAX_SIGNAL_DATA) {
                $problems[] = '`data` is longer than 1 MiB of JSON';
            }
        }
        if ($problems === [] && $repo->othersRunningNamed((string) $id, $id) > 0) {
            // drover.workflow_signal takes a name or an id as text: another running workflow
            // named "$id" would take it too.
            $problems[] = "another running workflow is named “{$id}”: a signal sent to workflow $id by its id would reach it too; send it from the application by name, or once that one has ended";
        }
        if ($problems !== []) {
            return response()->view('drover::workflow-signal', ['workflow' => $workflow, 'name' => $name, 'data' => $data, 'problems' => $problems], 422);
        }
        $took = (new WorkflowActionRepository($db))->signal($id, $name, $data === '' ? 'null' : $data);
        $outcome = $took > 0
            ? "signal “{$name}” sent to workflow $id “{$workflow->name}”: kept, and the nodes waiting for it released"
            : "signal “{$name}” was not sent to workflow $id “{$workflow->name}”: it has ended";
        // Its data is the application's: the audit trail keeps its size, not its content.
        (new ActionLog($db))->done(Actor::of($request), 'signal-workflow', ['workflow' => $id, 'name' => $workflow->name, 'signal' => $name, 'bytes' => strlen($data)], $outcome, $took > 0, $took);
        return redirect()->route('drover.workflow', $id)->with('drover.flash', ucfirst($outcome) . '.');
    }

    private function find(WorkflowRepository $repo, int $id): object
    {
        $workflow = $repo->find($id);
        abort_if($workflow === null, 404, "drover: workflow $id is not in drover.workflows (a workflow that ended is purged after its retention)");
        return $workflow;
    }
}
