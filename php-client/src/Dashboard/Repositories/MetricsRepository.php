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
}
