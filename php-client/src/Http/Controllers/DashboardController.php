<?php

namespace Drover\Http\Controllers;

use Drover\Dashboard\Chart;
use Drover\Dashboard\Reader;
use Illuminate\Http\Request;
use Illuminate\Routing\Controller;
use Illuminate\Support\Facades\DB;

/**
 * The read-only pages: overview (hosts, pools, workers, queues, circuits), pending, delayed and
 * running jobs, recently completed jobs, a job class's charts, batches, and tag search.
 */
class DashboardController extends Controller
{
    /** The `tag` query parameter, when it is one string (`?tag[]=` is ignored). */
    private static function tag(Request $request): ?string
    {
        $tag = $request->query('tag');
        return is_string($tag) && trim($tag) !== '' ? trim($tag) : null;
    }

    private function reader(): Reader
    {
        return new Reader(DB::connection(\Drover\Config\Embedded::connectionName(app(), config('drover.database') ?: null)));
    }

    public function overview()
    {
        $reader = $this->reader();
        $nodes = $reader->nodes();
        $workers = 0;
        $served = [];
        foreach ($nodes as $node) {
            foreach ($node->status['pools'] ?? [] as $pool) {
                $workers += count($pool['workers'] ?? []);
                foreach ($pool['queues'] ?? [] as $queue) {
                    $served[] = (string) $queue;
                }
            }
        }
        return view('drover::overview', [
            'nodes' => $nodes,
            'workers' => $workers,
            'queues' => $reader->queues($served),
            'paused' => $reader->pausedQueues(),
            'throughput' => $reader->throughput('queue'),
            'classes' => $reader->throughput('class'),
        ]);
    }

    public function jobs(Request $request, string $kind)
    {
        abort_unless(in_array($kind, ['pending', 'delayed', 'running'], true), 404);
        return view('drover::jobs', [
            'kind' => $kind,
            'jobs' => $this->reader()->jobs($kind, self::tag($request)),
        ]);
    }

    public function job(int $id)
    {
        $job = $this->reader()->job($id);
        abort_if($job === null, 404, "drover: job $id is not in drover.jobs (it may have completed)");
        return view('drover::job', ['job' => $job, 'completed' => null]);
    }

    public function completed(Request $request)
    {
        return view('drover::completed', [
            'jobs' => $this->reader()->completed(self::tag($request)),
            'history' => (int) config('drover.metrics.history', 0),
        ]);
    }

    public function completedJob(int $id, int $attempt)
    {
        $job = $this->reader()->completedJob($id, $attempt);
        abort_if($job === null, 404, "drover: job $id (attempt $attempt) is not in the history");
        return view('drover::job', ['job' => $job, 'completed' => $job]);
    }

    public function jobClass(Request $request)
    {
        $class = $request->query('class', '');
        $class = is_string($class) ? $class : '';
        $minutes = $this->reader()->classMinutes($class);
        $series = fn (callable $f) => array_map(fn ($m) => [$m['minute'], $f($m)], $minutes);
        return view('drover::class', [
            'class' => $class,
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
            $batches = app(\Illuminate\Bus\BatchRepository::class)->get(Reader::PAGE, null);
            $problem = null;
        } catch (\Throwable $e) {
            $batches = [];
            $problem = 'no batches to show: ' . $e->getMessage();
        }
        return view('drover::batches', ['batches' => $batches, 'problem' => $problem]);
    }

    public function tags(Request $request)
    {
        $tag = self::tag($request) ?? '';
        $reader = $this->reader();
        $found = $tag === '' ? null : [
            'pending' => $reader->jobs('pending', $tag),
            'delayed' => $reader->jobs('delayed', $tag),
            'running' => $reader->jobs('running', $tag),
            'completed' => $reader->completed($tag),
            'failed' => FailedJobsController::failed($tag),
        ];
        return view('drover::tags', ['tag' => $tag, 'found' => $found]);
    }
}
