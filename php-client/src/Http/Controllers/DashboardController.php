<?php

namespace Drover\Http\Controllers;

use Drover\Dashboard\Chart;
use Drover\Dashboard\Limits;
use Drover\Dashboard\Repositories\CompletedJobRepository;
use Drover\Dashboard\Repositories\FailedJobRepository;
use Drover\Dashboard\Repositories\JobRepository;
use Drover\Dashboard\Repositories\MetricsRepository;
use Drover\Dashboard\Repositories\NodeRepository;
use Drover\Dashboard\Repositories\PoolSizeRepository;
use Drover\Dashboard\Repositories\QueueRepository;
use Drover\Dashboard\Repositories\StopRequestRepository;
use Illuminate\Database\ConnectionInterface;
use Illuminate\Http\Request;
use Illuminate\Routing\Controller;

/**
 * The read-only pages: overview (hosts, pools, workers, queues, circuits), pending, delayed and
 * running jobs, recently completed jobs, a job class's charts, batches, and tag search.
 */
class DashboardController extends Controller
{
    /** The `tag` query parameter, when it is one string (a list is refused before: PlainTextInput). */
    private static function tag(Request $request): ?string
    {
        $tag = $request->query('tag');
        return is_string($tag) && trim($tag) !== '' ? trim($tag) : null;
    }

    /** drover's database connection (the embedded one on a laptop). */
    private static function db(): ConnectionInterface
    {
        return \Drover\Dashboard\DashboardDatabase::connection();
    }

    public function overview()
    {
        $db = self::db();
        $queues = new QueueRepository($db);
        $metrics = new MetricsRepository($db);
        $nodes = (new NodeRepository($db))->nodes();
        $workers = 0;
        $served = [];
        // Each queue's fleet-wide budget as the masters hold it (the smallest, should two differ
        // during a deploy).
        $budgets = [];
        foreach ($nodes as $node) {
            foreach ($node->status['queue_budgets'] ?? [] as $queue => $jobs) {
                $budgets[(string) $queue] = min((int) $jobs, $budgets[(string) $queue] ?? PHP_INT_MAX);
            }
        }
        foreach ($nodes as $node) {
            foreach ($node->status['pools'] ?? [] as $pool) {
                $workers += count($pool['workers'] ?? []);
                foreach ($pool['queues'] ?? [] as $queue) {
                    $served[] = (string) $queue;
                }
            }
        }
        $range = \Drover\Dashboard\Range::fromQuery(request()->query('range'));
        return view('drover::overview', [
            'range' => $range,
            'charts' => MetricsRepository::charts($metrics->series(null, null, $range), $range),
            'nodes' => $nodes,
            'workers' => $workers,
            'queues' => $queues->queues($served, Limits::OVERVIEW_COUNT_CAP),
            'cap' => Limits::OVERVIEW_COUNT_CAP,
            'estimates' => $queues->estimates(),
            'poolSizes' => (new PoolSizeRepository($db))->all(),
            'paused' => $queues->pausedQueues(),
            'budgets' => $budgets,
            'throughput' => $metrics->throughput('queue'),
            'classes' => $metrics->throughput('class'),
        ]);
    }

    /** One queue: its counts, whether it is paused, and its charts over a range. */
    public function queue(Request $request)
    {
        $name = $request->query('queue');
        abort_unless(is_string($name) && $name !== '' && mb_strlen($name) <= 200, 422, 'drover: name a queue: ?queue=…');
        $db = self::db();
        $queues = new QueueRepository($db);
        $range = \Drover\Dashboard\Range::fromQuery($request->query('range'));
        $counts = collect($queues->queues([$name], Limits::OVERVIEW_COUNT_CAP))->firstWhere('queue', $name);
        $paused = $queues->pausedQueues();
        return view('drover::queue', [
            'queue' => $name,
            'counts' => $counts,
            'cap' => Limits::OVERVIEW_COUNT_CAP,
            'estimate' => $queues->estimates()[$name] ?? null,
            'paused' => array_key_exists($name, $paused),
            'pausedFor' => $paused[$name] ?? null,
            'range' => $range,
            'charts' => MetricsRepository::charts((new MetricsRepository($db))->series($name, null, $range), $range),
            'refresh' => config('drover.dashboard.refresh', 5),
        ]);
    }

    public function jobs(Request $request, string $kind)
    {
        abort_unless(in_array($kind, ['pending', 'delayed', 'running'], true), 404);
        return view('drover::jobs', [
            'kind' => $kind,
            'jobs' => (new JobRepository(self::db()))->jobs($kind, self::tag($request)),
        ]);
    }

    public function job(int $id)
    {
        $job = (new JobRepository(self::db()))->job($id);
        abort_if($job === null, 404, "drover: job $id is not in drover.jobs (it may have completed)");
        $stop = (new StopRequestRepository(self::db()))->find($id);
        // A request for an attempt that is over says nothing of this one.
        $stop = $stop !== null && isset($job->lease_token) && (int) $stop->lease_token === (int) $job->lease_token ? $stop : null;
        $progress = (new \Drover\Dashboard\Repositories\JobProgressRepository(self::db()))->of($id);
        // A running job that reports its progress is followed live (as a stop asked of it is).
        $refresh = $stop !== null && $job->lease_expires_at ? 2 : ($progress !== null && $job->lease_expires_at ? (int) config('drover.dashboard.refresh', 5) : 0);
        return view('drover::job', [
            'job' => $job,
            'completed' => null,
            'stop' => $stop,
            'refresh' => $refresh,
            'progress' => $progress,
            'workflow' => (new \Drover\Dashboard\Repositories\WorkflowRepository(self::db()))->stepOf($id),
        ]);
    }

    public function completed(Request $request)
    {
        return view('drover::completed', [
            'jobs' => (new CompletedJobRepository(self::db()))->completed(self::tag($request)),
            'history' => (int) config('drover.metrics.history', 0),
        ]);
    }

    public function completedJob(int $id, int $attempt)
    {
        $job = (new CompletedJobRepository(self::db()))->completedJob($id, $attempt);
        abort_if($job === null, 404, "drover: job $id (attempt $attempt) is not in the history");
        return view('drover::job', [
            'job' => $job,
            'completed' => $job,
            'progress' => (new \Drover\Dashboard\Repositories\JobProgressRepository(self::db()))->of($id),
            'workflow' => (new \Drover\Dashboard\Repositories\WorkflowRepository(self::db()))->stepOf($id),
        ]);
    }

    public function jobClass(Request $request)
    {
        $class = $request->query('class', '');
        $class = is_string($class) ? $class : '';
        $range = \Drover\Dashboard\Range::fromQuery($request->query('range'));
        if ($range !== \Drover\Dashboard\Range::Hour) {
            return view('drover::class', [
                'class' => $class,
                'range' => $range,
                'minutes' => [],
                'charts' => MetricsRepository::charts((new MetricsRepository(self::db()))->series(null, $class, $range), $range),
            ]);
        }
        $minutes = (new MetricsRepository(self::db()))->classMinutes($class);
        $series = fn (callable $f) => array_map(fn ($m) => [$m['minute'], $f($m)], $minutes);
        return view('drover::class', [
            'class' => $class,
            'range' => $range,
            'minutes' => $minutes,
            'charts' => [
                Chart::svg('Throughput', 'jobs/min', [
                    'completed' => $series(fn ($m) => $m['completed']),
                    'failed' => $series(fn ($m) => $m['failed']),
                ]),
                Chart::svg('Run time', 'ms', [
                    'p50' => $series(fn ($m) => $m['runtime']->quantile(0.5)),
                    'p95' => $series(fn ($m) => $m['runtime']->quantile(0.95)),
                ]),
                Chart::svg('Wait', 'ms', [
                    'p50' => $series(fn ($m) => $m['wait']->quantile(0.5)),
                    'p95' => $series(fn ($m) => $m['wait']->quantile(0.95)),
                ]),
                Chart::svg('CPU per job', 'ms', [
                    'mean' => $series(fn ($m) => $m['cpu']->mean()),
                    'p95' => $series(fn ($m) => $m['cpu']->quantile(0.95)),
                ]),
                Chart::svg('Peak memory', 'MiB', [
                    'max' => $series(fn ($m) => $m['memory']->max() === null ? null : $m['memory']->max() / 1024),
                ]),
            ],
        ]);
    }

    public function batches()
    {
        try {
            $batches = app(\Illuminate\Bus\BatchRepository::class)->get(Limits::PAGE, null);
            $problem = null;
        } catch (\Throwable $e) {
            $batches = [];
            $problem = 'no batches to show: ' . \Drover\Dashboard\Redaction::fromConfig()->text($e->getMessage());
        }
        return view('drover::batches', ['batches' => $batches, 'problem' => $problem]);
    }

    /**
     * A tag across every state: how many jobs carry it in each (counted for a short time each,
     * so the page answers quickly over a million jobs; "at least" when a count ran out of its
     * time), each a link to the search that lists them.
     */
    public function tags(Request $request)
    {
        $tag = self::tag($request) ?? '';
        $found = null;
        if ($tag !== '') {
            $search = new \Drover\Dashboard\Repositories\SearchRepository(self::db());
            $found = [];
            foreach (\Drover\Dashboard\Search\State::cases() as $state) {
                [$filter, $problems] = \Drover\Dashboard\Search\JobFilter::fromQuery(['state' => $state->value, 'tag' => $tag]);
                if ($filter === null) {
                    abort(422, 'drover: ' . implode('; ', $problems));
                }
                try {
                    $found[$state->value] = ['state' => $state, 'count' => $search->count($filter, Limits::TAG_COUNT_MS), 'query' => $filter->query()];
                } catch (\Drover\Dashboard\Repositories\SearchUnavailable $e) {
                    $found[$state->value] = ['state' => $state, 'count' => null, 'query' => $filter->query(), 'unavailable' => $e->getMessage()];
                }
            }
        }
        return view('drover::tags', ['tag' => $tag, 'found' => $found]);
    }
}
