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

    /** Counts shown up to this many (a count is a walk of the index; a huge backlog shows as "at least"). */
    public const COUNT_CAP = 100000;

    /**
     * The queues that hold jobs: a loose index scan of jobs_ready (one probe per queue, not a scan
     * of the backlog), plus the queues of leased jobs (jobs_leased: as many as are in flight).
     *
     * @return list<string>
     */
    public function queueNames(): array
    {
        $rows = $this->db->select(
            "WITH RECURSIVE q(name) AS (
                 SELECT min(queue) FROM drover.jobs WHERE lease_token IS NULL
               UNION ALL
                 SELECT (SELECT min(queue) FROM drover.jobs WHERE lease_token IS NULL AND queue > q.name)
                 FROM q WHERE q.name IS NOT NULL
             )
             SELECT name FROM q WHERE name IS NOT NULL
             UNION
             SELECT DISTINCT queue FROM drover.jobs WHERE lease_token IS NOT NULL
             ORDER BY 1"
        );
        return array_map(fn ($r) => $r->name, $rows);
    }

    /**
     * Queues paused by name (`queue:pause`), each with the seconds left (null: until resumed).
     *
     * @return array<string, float|null>
     */
    public function pausedQueues(): array
    {
        return (new \Drover\Queue\QueuePauses($this->db))->paused();
    }

    /**
     * Per queue: pending, delayed and running (each counted up to COUNT_CAP through the claim's
     * own index) and how long its oldest available job has waited.
     *
     * @param list<string> $also queues to list even when empty (those the masters serve)
     * @return list<object>
     */
    public function queues(array $also = []): array
    {
        $names = array_values(array_unique(array_merge($this->queueNames(), $also)));
        sort($names);
        if ($names === []) {
            return [];
        }
        $cap = self::COUNT_CAP;
        $list = '{' . implode(',', array_map(fn ($n) => '"' . addcslashes($n, '"\\') . '"', $names)) . '}';
        $rows = $this->db->select(
            "SELECT q.queue,
                    (SELECT count(*) FROM (SELECT 1 FROM drover.jobs WHERE queue = q.queue AND lease_token IS NULL AND available_at <= now() LIMIT $cap) p) AS pending,
                    (SELECT count(*) FROM (SELECT 1 FROM drover.jobs WHERE queue = q.queue AND lease_token IS NULL AND available_at > now() LIMIT $cap) d) AS delayed,
                    (SELECT count(*) FROM drover.jobs WHERE queue = q.queue AND lease_token IS NOT NULL) AS running,
                    0::float8 AS oldest_wait
             FROM unnest(?::text[]) AS q(queue)
             ORDER BY q.queue",
            [$list]
        );
        $oldest = [];
        foreach ($this->oldestWaits($list) as $row) {
            $oldest[$row->queue] = (float) $row->seconds;
        }
        foreach ($rows as $row) {
            $row->oldest_wait = $oldest[$row->queue] ?? 0.0;
        }
        return $rows;
    }

    /**
     * Per queue, how long its oldest available job has waited: the master's skip scan
     * (broker/queries/oldest_wait.sql) — per queue one probe per distinct priority, then the
     * first entry of each priority in jobs_ready's order.
     *
     * @return list<object> queue, seconds
     */
    private function oldestWaits(string $list): array
    {
        return $this->db->select(
            "WITH RECURSIVE prio(queue, priority) AS (
                 SELECT q.name, (SELECT priority FROM drover.jobs WHERE queue = q.name AND lease_token IS NULL ORDER BY priority DESC LIMIT 1)
                 FROM unnest(?::text[]) AS q(name)
               UNION ALL
                 SELECT p.queue, (SELECT priority FROM drover.jobs WHERE queue = p.queue AND lease_token IS NULL AND priority < p.priority ORDER BY priority DESC LIMIT 1)
                 FROM prio AS p WHERE p.priority IS NOT NULL
             )
             SELECT p.queue, extract(epoch FROM now() - min(d.available_at))::float8 AS seconds
             FROM prio AS p
             CROSS JOIN LATERAL (
                 SELECT available_at FROM drover.jobs
                 WHERE queue = p.queue AND priority = p.priority AND lease_token IS NULL
                 ORDER BY available_at LIMIT 1
             ) AS d
             WHERE d.available_at <= now()
             GROUP BY p.queue",
            [$list]
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
     * Pending (available now), delayed or running (leased) jobs: per queue the next ones in the
     * claim's order (through jobs_ready; running ones through jobs_leased), at most PAGE in all;
     * with $tag only those tagged so.
     *
     * @return list<object>
     */
    public function jobs(string $kind, ?string $tag = null): array
    {
        $tagged = $tag !== null && $tag !== '';
        // A tag search reads more candidates: the exact match is made after (see onlyTagged).
        $limit = $tagged ? self::PAGE * 10 : self::PAGE;
        $columns = 'id, queue, priority, attempts, available_at, created_at, lease_expires_at, payload, failure';
        [$tagWhere, $bindings] = $tagged ? self::tagged($tag) : ['true', []];
        if ($kind === 'running') {
            $rows = $this->db->select(
                "SELECT $columns FROM drover.jobs WHERE lease_token IS NOT NULL AND $tagWhere ORDER BY lease_expires_at LIMIT $limit",
                $bindings
            );
        } else {
            $due = $kind === 'delayed' ? 'available_at > now()' : 'available_at <= now()';
            $names = $this->queueNames();
            if ($names === []) {
                return [];
            }
            $list = '{' . implode(',', array_map(fn ($n) => '"' . addcslashes($n, '"\\') . '"', $names)) . '}';
            $rows = $this->db->select(
                "SELECT j.* FROM unnest(?::text[]) AS q(name)
                 CROSS JOIN LATERAL (
                     SELECT $columns FROM drover.jobs
                     WHERE queue = q.name AND lease_token IS NULL AND $due AND $tagWhere
                     ORDER BY priority DESC, available_at, id
                     LIMIT $limit
                 ) AS j
                 ORDER BY j.available_at, j.id
                 LIMIT $limit",
                array_merge([$list], $bindings)
            );
        }
        return array_slice(self::onlyTagged(array_map([self::class, 'decode'], $rows), $tag), 0, self::PAGE);
    }

    /** A job in drover.jobs, or waiting behind its group's head; with `group` (Groups::of) when grouped. */
    public function job(int $id): ?object
    {
        $row = $this->db->selectOne('SELECT id, queue, priority, attempts, max_attempts, available_at, created_at, lease_expires_at, lease_owner, payload, failure FROM drover.jobs WHERE id = ?', [$id]);
        $groups = new Groups($this->db);
        $row ??= $groups->waitingJob($id);
        if ($row === null) {
            return null;
        }
        $row = self::decode($row);
        $row->group = $groups->of($id);
        return $row;
    }

    /** Completed jobs, newest first (the history, when it is on). @return list<object> */
    public function completed(?string $tag = null): array
    {
        if (!$this->hasHistory()) {
            return [];
        }
        $tagged = $tag !== null && $tag !== '';
        [$where, $bindings] = $tagged ? self::tagged($tag) : ['true', []];
        $limit = $tagged ? self::PAGE * 10 : self::PAGE;
        return array_slice(self::onlyTagged(array_map([self::class, 'decode'], $this->db->select(
            "SELECT id, attempt, queue, class, payload, hostname, worker_pid, started_at, finished_at, runtime_ms, wait_ms, cpu_ms, memory_kib
             FROM drover.recent_jobs WHERE $where ORDER BY finished_at DESC LIMIT $limit",
            $bindings
        )), $tag), 0, self::PAGE);
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

    private function hasHistory(): bool
    {
        return (bool) $this->db->selectOne("SELECT to_regclass('drover.recent_jobs') IS NOT NULL AS present")->present;
    }

    /**
     * Payloads that hold the tag as a JSON string, in either of the encodings Laravel writes
     * (unescaped Unicode when pushed, `\uXXXX` after `queue:retry` re-encodes it): a condition
     * and its bindings. The rows are then kept only if their decoded `tags` hold it exactly
     * (onlyTagged). No jsonb cast: a payload that is not JSON must not fail the page.
     *
     * @return array{0: string, 1: list<string>}
     */
    public static function tagged(string $tag): array
    {
        return [
            '(strpos(payload, ?) > 0 OR strpos(payload, ?) > 0)',
            [(string) json_encode($tag, JSON_UNESCAPED_UNICODE), (string) json_encode($tag)],
        ];
    }

    /** @param list<object> $rows @return list<object> */
    public static function onlyTagged(array $rows, ?string $tag): array
    {
        if ($tag === null || $tag === '') {
            return $rows;
        }
        return array_values(array_filter($rows, fn ($row) => in_array($tag, $row->tags, true)));
    }

    /**
     * A decoded payload's tags: only scalar ones, as strings (another producer may write anything
     * under `tags`).
     *
     * @return list<string>
     */
    public static function tagsOf(?array $payload): array
    {
        $tags = $payload['tags'] ?? null;
        if (!is_array($tags)) {
            return [];
        }
        return array_values(array_map('strval', array_filter($tags, 'is_scalar')));
    }

    /** The row with its payload decoded (`payload_array`), its class and its tags. */
    private static function decode(object $row): object
    {
        $decoded = json_decode($row->payload ?? '', true);
        $row->payload_array = is_array($decoded) ? $decoded : null;
        $row->display_name = $row->class ?? ($row->payload_array['displayName'] ?? '');
        $row->tags = self::tagsOf($row->payload_array);
        return $row;
    }
}
