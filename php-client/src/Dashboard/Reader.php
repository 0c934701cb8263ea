<?php

namespace Drover\Dashboard;

use Illuminate\Database\ConnectionInterface;

/**
 * What the dashboard reads from drover's schema: the masters' node rows (their status), the
 * queues (drover.jobs), the per-minute metrics (drover.metrics) and the completed-job history
 * (drover.recent_jobs). Every list is bounded; "now" is the database's.
 */
final class Reader
{
    /** Rows a list shows. */
    public const PAGE = 50;

    public function __construct(private ConnectionInterface $db)
    {
    }

    /** @return list<object> each master: hostname, pid, started_at, heartbeat_at, status (decoded) */
    public function nodes(): array
    {
        $rows = $this->db->select('SELECT id, hostname, pid, started_at, heartbeat_at, status::text AS status, status_at FROM drover.nodes ORDER BY hostname, id');
        foreach ($rows as $row) {
            $row->status = $row->status === null ? null : json_decode($row->status, true);
        }
        return $rows;
    }

    /** @return list<object> per queue: pending, delayed, running, oldest_wait (seconds) */
    public function queues(): array
    {
        return $this->db->select(
            "SELECT queue,
                    count(*) FILTER (WHERE lease_token IS NULL AND available_at <= now()) AS pending,
                    count(*) FILTER (WHERE lease_token IS NULL AND available_at > now()) AS delayed,
                    count(*) FILTER (WHERE lease_token IS NOT NULL) AS running,
                    coalesce(extract(epoch FROM now() - min(available_at) FILTER (WHERE lease_token IS NULL AND available_at <= now())), 0)::float8 AS oldest_wait
             FROM drover.jobs GROUP BY queue ORDER BY queue"
        );
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
     * Pending (available now), delayed or running (leased) jobs, oldest first; with $tag only
     * those tagged so.
     *
     * @return list<object>
     */
    public function jobs(string $kind, ?string $tag = null): array
    {
        $where = match ($kind) {
            'delayed' => 'lease_token IS NULL AND available_at > now()',
            'running' => 'lease_token IS NOT NULL',
            default => 'lease_token IS NULL AND available_at <= now()',
        };
        $bindings = [];
        if ($tag !== null && $tag !== '') {
            $where .= " AND " . self::TAGGED;
            $bindings[] = self::tagNeedle($tag);
        }
        $order = $kind === 'running' ? 'lease_expires_at' : 'available_at, id';
        return self::onlyTagged(array_map([self::class, 'decode'], $this->db->select(
            "SELECT id, queue, priority, attempts, available_at, created_at, lease_expires_at, payload, failure
             FROM drover.jobs WHERE $where ORDER BY $order LIMIT " . self::PAGE,
            $bindings
        )), $tag);
    }

    public function job(int $id): ?object
    {
        $row = $this->db->selectOne('SELECT id, queue, priority, attempts, max_attempts, available_at, created_at, lease_expires_at, lease_owner, payload, failure FROM drover.jobs WHERE id = ?', [$id]);
        return $row === null ? null : self::decode($row);
    }

    /** Completed jobs, newest first (the history, when it is on). @return list<object> */
    public function completed(?string $tag = null): array
    {
        if (!$this->hasHistory()) {
            return [];
        }
        $where = 'true';
        $bindings = [];
        if ($tag !== null && $tag !== '') {
            $where = self::TAGGED;
            $bindings[] = self::tagNeedle($tag);
        }
        return self::onlyTagged(array_map([self::class, 'decode'], $this->db->select(
            "SELECT id, attempt, queue, class, payload, hostname, worker_pid, started_at, finished_at, runtime_ms, wait_ms, cpu_ms, memory_kib
             FROM drover.recent_jobs WHERE $where ORDER BY finished_at DESC LIMIT " . self::PAGE,
            $bindings
        )), $tag);
    }

    public function completedJob(int $id, int $attempt): ?object
    {
        if (!$this->hasHistory()) {
            return null;
        }
        $row = $this->db->selectOne('SELECT * FROM drover.recent_jobs WHERE id = ? AND attempt = ?', [$id, $attempt]);
        return $row === null ? null : self::decode($row);
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

    /** @return list<string> the classes with metrics in the last $minutes */
    public function classes(int $minutes = 60): array
    {
        return array_map(fn ($r) => $r->class, $this->db->select(
            'SELECT DISTINCT class FROM drover.metrics WHERE minute > now() - make_interval(mins => ?) ORDER BY class',
            [$minutes]
        ));
    }

    private function hasHistory(): bool
    {
        return (bool) $this->db->selectOne("SELECT to_regclass('drover.recent_jobs') IS NOT NULL AS present")->present;
    }

    /**
     * A payload that holds the tag's JSON string (as Laravel encodes payloads); the rows are then
     * kept only if the decoded `tags` (Drover\Tags) hold it. No jsonb cast: a payload that is not
     * JSON must not fail the page.
     */
    private const TAGGED = 'strpos(payload, ?) > 0';

    private static function tagNeedle(string $tag): string
    {
        return (string) json_encode($tag, JSON_UNESCAPED_UNICODE);
    }

    /** @param list<object> $rows @return list<object> */
    private static function onlyTagged(array $rows, ?string $tag): array
    {
        if ($tag === null || $tag === '') {
            return $rows;
        }
        return array_values(array_filter($rows, fn ($row) => in_array($tag, $row->tags, true)));
    }

    /** The row with its payload decoded (`payload_array`), its class and its tags. */
    private static function decode(object $row): object
    {
        $decoded = json_decode($row->payload ?? '', true);
        $row->payload_array = is_array($decoded) ? $decoded : null;
        $row->display_name = $row->class ?? ($row->payload_array['displayName'] ?? '');
        $row->tags = is_array($row->payload_array['tags'] ?? null) ? $row->payload_array['tags'] : [];
        return $row;
    }
}
