<?php

namespace Drover\Dashboard\Repositories;

use Illuminate\Database\ConnectionInterface;
use Drover\Dashboard\Distribution;

/**
 * The per-minute metrics (drover.metrics): throughput per queue or class, and one class's minutes
 * with their distributions.
 */
final class MetricsRepository
{
    public function __construct(private ConnectionInterface $db)
    {
    }

    /**
     * Per queue (or per class), over the last $minutes: completed, failed, released, jobs per
     * minute, and the mean run time and wait (ms).
     *
     * @return list<object>
     */
    public function throughput(string $by, int $minutes = 60): array
    {
        $column = $by === 'class' ? 'class' : 'queue';
        return $this->db->select(
            "SELECT $column AS name, sum(completed)::int8 AS completed, sum(failed)::int8 AS failed,
                    sum(released)::int8 AS released,
                    (sum(completed) + sum(failed) + sum(released))::float8 / ? AS per_minute,
                    sum((runtime->>'sum')::float8) / nullif(sum((runtime->>'n')::int8), 0) AS runtime_ms,
                    sum((wait->>'sum')::float8) / nullif(sum((wait->>'n')::int8), 0) AS wait_ms,
                    sum((cpu->>'sum')::float8) / nullif(sum((cpu->>'n')::int8), 0) AS cpu_ms,
                    max((memory->>'max')::float8) AS memory_kib
             FROM drover.metrics WHERE minute > now() - make_interval(mins => ?)
             GROUP BY $column ORDER BY $column",
            [$minutes, $minutes]
        );
    }

    /**
     * One class's minutes over the last $minutes, merged across nodes and queues: per minute the
     * counts and, from the histograms, p50 and p95 of run time, wait, CPU and memory.
     *
     * @return list<array<string, mixed>>
     */
    public function classMinutes(string $class, int $minutes = 60): array
    {
        $rows = $this->db->select(
            "SELECT extract(epoch FROM minute)::int8 AS minute, completed, failed, released,
                    runtime::text AS runtime, wait::text AS wait, cpu::text AS cpu, memory::text AS memory
             FROM drover.metrics WHERE class = ? AND minute > now() - make_interval(mins => ?)
             ORDER BY minute",
            [$class, $minutes]
        );
        $byMinute = [];
        foreach ($rows as $row) {
            $m = (int) $row->minute;
            $byMinute[$m] ??= ['minute' => $m, 'completed' => 0, 'failed' => 0, 'released' => 0, 'runtime' => new Distribution(), 'wait' => new Distribution(), 'cpu' => new Distribution(), 'memory' => new Distribution()];
            foreach (['completed', 'failed', 'released'] as $count) {
                $byMinute[$m][$count] += (int) $row->{$count};
            }
            foreach (['runtime', 'wait', 'cpu', 'memory'] as $d) {
                $byMinute[$m][$d]->add(json_decode($row->{$d}, true) ?: []);
            }
        }
        return array_values($byMinute);
    }

    /**
     * Points over $range for one queue, one class, or everything (both null), merged across
     * nodes (and queues or classes): per step its start (Unix seconds), counts, and run time and
     * wait as merged distributions. The histograms are merged in the database (bucket by
     * bucket), so a week of minutes is at most one row per step and bucket here.
     *
     * @return list<array{at: int, completed: int, failed: int, released: int, runtime: Distribution, wait: Distribution}>
     */
    public function series(?string $queue, ?string $class, \Drover\Dashboard\Range $range): array
    {
        $step = $range->step() * 60;
        $where = 'minute > now() - make_interval(mins => ?) AND (?::text IS NULL OR queue = ?) AND (?::text IS NULL OR class = ?)';
        $bindings = [$step, $range->minutes(), $queue, $queue, $class, $class];
        $bin = 'floor(extract(epoch FROM minute) / ?)::int8';
        $points = [];
        foreach ($this->db->select(
            "SELECT $bin AS bin, sum(completed)::int8 AS completed, sum(failed)::int8 AS failed, sum(released)::int8 AS released,
                    max((runtime->>'max')::float8) AS runtime_max, max((wait->>'max')::float8) AS wait_max
             FROM drover.metrics WHERE $where GROUP BY 1 ORDER BY 1",
            $bindings
        ) as $row) {
            $at = (int) $row->bin * $step;
            $points[$at] = [
                'at' => $at,
                'completed' => (int) $row->completed,
                'failed' => (int) $row->failed,
                'released' => (int) $row->released,
                'runtime' => new Distribution(),
                'wait' => new Distribution(),
                'max' => ['runtime' => (float) $row->runtime_max, 'wait' => (float) $row->wait_max],
            ];
        }
        foreach (['runtime', 'wait'] as $d) {
            $buckets = [];
            foreach ($this->db->select(
                "SELECT $bin AS bin, (e->>0)::float8 AS upper, sum((e->>1)::int8)::int8 AS n
                 FROM drover.metrics, jsonb_array_elements(CASE WHEN jsonb_typeof($d->'buckets') = 'array' THEN $d->'buckets' ELSE '[]'::jsonb END) e
                 WHERE $where GROUP BY 1, 2",
                $bindings
            ) as $row) {
                $buckets[(int) $row->bin * $step][] = [(float) $row->upper, (int) $row->n];
            }
            foreach ($buckets as $at => $list) {
                if (isset($points[$at])) {
                    $points[$at][$d]->add([
                        'n' => array_sum(array_column($list, 1)),
                        'max' => $points[$at]['max'][$d],
                        'buckets' => $list,
                    ]);
                }
            }
        }
        foreach ($points as &$point) {
            unset($point['max']);
        }
        return array_values($points);
    }

    /**
     * The charts of a series: throughput (jobs per minute), wait and run time (p50, p95).
     *
     * @param list<array<string, mixed>> $points from series()
     * @return list<string> SVG
     */
    public static function charts(array $points, \Drover\Dashboard\Range $range): array
    {
        $per = fn (callable $f) => array_map(fn ($p) => [$p['at'], $f($p)], $points);
        $step = $range->step();
        $now = time();
        $window = [$now - $range->minutes() * 60, $now];
        return [
            \Drover\Dashboard\Chart::svg('Throughput', 'jobs/min', [
                'completed' => $per(fn ($p) => $p['completed'] / $step),
                'failed' => $per(fn ($p) => $p['failed'] / $step),
            ], $window),
            \Drover\Dashboard\Chart::svg('Wait', 'ms', [
                'p50' => $per(fn ($p) => $p['wait']->quantile(0.5)),
                'p95' => $per(fn ($p) => $p['wait']->quantile(0.95)),
            ], $window),
            \Drover\Dashboard\Chart::svg('Run time', 'ms', [
                'p50' => $per(fn ($p) => $p['runtime']->quantile(0.5)),
                'p95' => $per(fn ($p) => $p['runtime']->quantile(0.95)),
            ], $window),
        ];
    }
}
