<?php

namespace Drover\Dashboard\Repositories;

use Drover\Dashboard\Limits;
use Drover\Dashboard\Redaction;
use Drover\Schema\BrokerQuery;
use Illuminate\Database\ConnectionInterface;

/**
 * What the dashboard reads of ordered groups (docs/ordered-groups.md): per queue, its groups,
 * held ones, jobs waiting behind heads and the oldest head's age; the held groups with the failed
 * job that holds each; a group's jobs in order. Every read is bounded by an index: drover.groups'
 * primary key per queue, groups_held, group_jobs' primary key. The per-queue counts and the held
 * groups are the master's own reads (Drover\Schema\BrokerQuery); the rest only the dashboard
 * makes.
 */
final class GroupRepository
{
    public function __construct(private ConnectionInterface $db)
    {
    }

    /**
     * The queues that have groups: a loose index scan of drover.groups' primary key (one probe
     * per queue).
     *
     * @return list<string>
     */
    public function queueNames(): array
    {
        $rows = $this->db->select(
            'WITH RECURSIVE q(name) AS (
                 SELECT min(queue) FROM drover.groups
               UNION ALL
                 SELECT (SELECT min(queue) FROM drover.groups WHERE queue > q.name) FROM q WHERE q.name IS NOT NULL
             )
             SELECT name FROM q WHERE name IS NOT NULL ORDER BY name'
        );
        return array_map(fn ($r) => (string) $r->name, $rows);
    }

    /**
     * Per queue that has groups, in name order, each count capped at Limits::COUNT_CAP: the
     * master's own read (broker/queries/shared/group_stats.sql) over the queues of queueNames().
     *
     * @return list<object> queue, groups, held, waiting, oldest_head_secs (null: no head)
     */
    public function queues(): array
    {
        $names = $this->queueNames();
        if ($names === []) {
            return [];
        }
        $read = BrokerQuery::named('group_stats');
        $rows = $this->db->select($read->sql, $read->bindings([BrokerQuery::textArray($names), null, Limits::COUNT_CAP]));
        usort($rows, fn (object $a, object $b) => strcmp((string) $a->queue, (string) $b->queue));
        return $rows;
    }

    /**
     * The held groups, oldest first, at most Limits::PAGE: the master's own read
     * (broker/queries/shared/held_groups.sql) over every queue that has groups. Each names the
     * failed job that holds it (its uuid is the failer's key for retry and forget), its error,
     * since when (held_at_secs, and held_at as this application's time zone shows it) and how
     * many jobs wait behind it.
     *
     * @return list<object> queue, name, held_by, held_uuid, held_error, held_at_secs, held_at, waiting
     */
    public function held(): array
    {
        $names = $this->queueNames();
        if ($names === []) {
            return [];
        }
        $read = BrokerQuery::named('held_groups');
        $rows = $this->db->select($read->sql, $read->bindings([BrokerQuery::textArray($names), Limits::PAGE]));
        foreach ($rows as $row) {
            $row->held_at = $row->held_at_secs === null ? null : date('Y-m-d H:i:sP', (int) $row->held_at_secs);
            Redaction::fromConfig()->row($row);
        }
        return $rows;
    }

    /**
     * The groups whose head has been the head longest (the groups that have waited longest for
     * one job), oldest first, across queues. Only the dashboard lists heads: the master's nearest
     * read, broker/queries/oldest_held_wait.sql, answers another question (per queue, the job
     * that has waited longest behind its head, for long-wait alerts).
     *
     * @return list<object> queue, name, head, waiting, head_since
     */
    public function oldestHeads(): array
    {
        return $this->db->select(
            'SELECT queue, name, head, waiting, head_since FROM drover.groups
             WHERE head IS NOT NULL ORDER BY head_since LIMIT ' . Limits::PAGE
        );
    }

    /** The group's row (the error that holds it redacted), or null when it has no job. */
    public function group(string $queue, string $name): ?object
    {
        $row = $this->db->selectOne(
            'SELECT queue, name, head, tail, waiting, head_since, held_by, held_uuid, held_error, held_at
             FROM drover.groups WHERE queue = ? AND name = ?',
            [$queue, $name]
        );
        return $row === null ? null : Redaction::fromConfig()->row($row);
    }

    /**
     * The group's jobs in the order they will run: its head (in drover.jobs, or in
     * drover.limit_waiting while it takes its limits), then those waiting
     * behind it by position, at most Limits::PAGE.
     *
     * @return list<object> id, position (null for the head), state, available_at, attempts, payload...
     */
    public function jobs(string $queue, string $name): array
    {
        $head = $this->db->select(
            "SELECT id, NULL::bigint AS position, CASE WHEN lease_token IS NULL THEN 'head, waiting' ELSE 'head, running' END AS state,
                    available_at, attempts, payload
             FROM drover.jobs WHERE queue = ? AND grp = ?
             UNION ALL
             SELECT id, NULL::bigint, 'head, waiting for limit ' || waits_on, available_at, 0, payload
             FROM drover.limit_waiting WHERE id = (SELECT head FROM drover.groups WHERE queue = ? AND name = ?)",
            [$queue, $name, $queue, $name]
        );
        $waiting = $this->db->select(
            "SELECT id, position, 'waiting' AS state, available_at, 0 AS attempts, payload
             FROM drover.group_jobs WHERE queue = ? AND grp = ? ORDER BY position LIMIT " . Limits::PAGE,
            [$queue, $name]
        );
        // Their class and tags; a list carries no payload.
        return array_map(fn (object $row) => \Drover\Dashboard\Payloads::decode($row), array_merge($head, $waiting));
    }

    /**
     * Where a job stands in its group: queue, grp and position (null for the head), or null for
     * an ungrouped job or one that is gone.
     */
    public function of(int $id): ?object
    {
        return $this->db->selectOne(
            'SELECT queue, grp, NULL::bigint AS position FROM drover.jobs WHERE id = ? AND grp IS NOT NULL
             UNION ALL
             SELECT queue, grp, NULL::bigint FROM drover.limit_waiting WHERE id = ? AND grp IS NOT NULL
             UNION ALL
             SELECT queue, grp, position FROM drover.group_jobs WHERE id = ?
             LIMIT 1',
            [$id, $id, $id]
        );
    }

    /** A job waiting behind its group's head, as the job page shows it (not in drover.jobs). */
    public function waitingJob(int $id): ?object
    {
        return $this->db->selectOne(
            'SELECT id, queue, priority, 0 AS attempts, max_attempts, available_at, created_at, NULL AS lease_expires_at,
                    NULL AS lease_owner, payload, NULL AS failure
             FROM drover.group_jobs WHERE id = ?',
            [$id]
        );
    }
}
