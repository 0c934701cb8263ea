<?php

namespace Drover\Dashboard\Repositories;

use Drover\Dashboard\Limits;
use Drover\Schema\BrokerQuery;
use Illuminate\Database\ConnectionInterface;

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
     * own index) and how long its oldest available job has waited (the master's own read).
     *
     * The pending count is what the master counts as a queue's backlog
     * (broker/queries/backlog.sql: not leased, due, capped), but not its statement: the dashboard
     * counts pending, delayed and running in one statement, one round trip, where the master needs
     * the backlog alone. SharedReadsTest holds the two counts to the same answers.
     *
     * @param list<string> $also queues to list even when empty (those the masters serve)
     * @return list<object>
     */
    public function queues(array $also = [], int $cap = Limits::COUNT_CAP): array
    {
        $names = array_values(array_unique(array_merge($this->queueNames(), $also)));
        sort($names);
        if ($names === []) {
            return [];
        }
        $list = BrokerQuery::textArray($names);
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
            $oldest[$row->queue] = (float) $row->oldest_wait_secs;
        }
        foreach ($rows as $row) {
            $row->oldest_wait = $oldest[$row->queue] ?? 0.0;
        }
        return $rows;
    }

    /**
     * Per queue, how many jobs the table's statistics say it holds (pending, delayed and running
     * together): the planner's most common values of `drover.jobs.queue` times the table's row
     * estimate, as of the last ANALYZE (autovacuum's). Queues the statistics do not list are
     * absent. For a queue whose count reached its cap, beside "10,000+": an estimate, said so.
     *
     * @return array<string, int>
     */
    public function estimates(): array
    {
        $rows = $this->db->select(
            "SELECT f.queue, round(f.freq * greatest(c.reltuples, 0))::int8 AS estimate
             FROM pg_stats s
             JOIN pg_class c ON c.oid = 'drover.jobs'::regclass
             CROSS JOIN LATERAL unnest(s.most_common_vals::text::text[], s.most_common_freqs) AS f(queue, freq)
             WHERE s.schemaname = 'drover' AND s.tablename = 'jobs' AND s.attname = 'queue'"
        );
        $estimates = [];
        foreach ($rows as $row) {
            $estimates[(string) $row->queue] = (int) $row->estimate;
        }
        return $estimates;
    }

    /**
     * Per queue, how long its oldest available job has waited: the master's own read
     * (broker/queries/shared/oldest_wait.sql), a skip scan — per queue one probe per distinct
     * priority, then the first entry of each priority in jobs_ready's order. Queues with no
     * available job are absent.
     *
     * @return list<object> queue, oldest_wait_secs
     */
    private function oldestWaits(string $list): array
    {
        $read = BrokerQuery::named('oldest_wait');
        return $this->db->select($read->sql, $read->bindings([$list, null]));
    }
}
