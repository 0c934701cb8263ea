<?php

namespace Drover\Dashboard\Repositories;

use Illuminate\Database\ConnectionInterface;
use Drover\Dashboard\Limits;

/**
 * The queues, from drover.jobs: which hold jobs, their pending, delayed and running counts (each
 * capped) and their oldest wait, through the claim's own indexes; and the queues paused by name.
 */
final class QueueRepository
{
    public function __construct(private ConnectionInterface $db)
    {
    }

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
        $cap = Limits::COUNT_CAP;
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
}
