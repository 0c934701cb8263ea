<?php

namespace Drover\Dashboard\Repositories;

use Drover\Dashboard\Limits;
use Illuminate\Database\ConnectionInterface;

/**
 * What the dashboard reads of ordered groups (docs/ordered-groups.md): per queue, its groups,
 * held ones, jobs waiting behind heads and the oldest head's age; the held groups with the failed
 * job that holds each; a group's jobs in order. Every read is bounded by an index: drover.groups'
 * primary key per queue, groups_held, group_jobs' primary key.
 */
final class GroupRepository
{
    public function __construct(private ConnectionInterface $db)
    {
    }

    /**
     * Per queue that has groups (a loose index scan of the primary key: one probe per queue),
     * each count capped at Limits::COUNT_CAP.
     *
     * @return list<object> queue, groups, held, waiting, oldest_head (seconds or null)
     */
    public function queues(): array
    {
        $cap = Limits::COUNT_CAP;
        return $this->db->select(
            "WITH RECURSIVE q(name) AS (
                 SELECT min(queue) FROM drover.groups
               UNION ALL
                 SELECT (SELECT min(queue) FROM drover.groups WHERE queue > q.name) FROM q WHERE q.name IS NOT NULL
             )
             SELECT q.name AS queue, s.*
             FROM q
             CROSS JOIN LATERAL (
                 SELECT count(*) AS groups, count(*) FILTER (WHERE g.head IS NULL) AS held,
                        coalesce(sum(g.waiting), 0) AS waiting,
                        extract(epoch FROM now() - min(g.head_since) FILTER (WHERE g.head IS NOT NULL))::float8 AS oldest_head
                 FROM (SELECT head, waiting, head_since FROM drover.groups WHERE queue = q.name LIMIT $cap) AS g
             ) AS s
             WHERE q.name IS NOT NULL
             ORDER BY q.name"
        );
    }

    /**
     * The held groups, oldest first: the failed job that holds each (its uuid is the failer's
     * key for retry and forget), its error, and how many jobs wait behind it.
     *
     * @return list<object>
     */
    public function held(): array
    {
        return $this->db->select(
            'SELECT queue, name, held_by, held_uuid, held_error, held_at, waiting
             FROM drover.groups WHERE head IS NULL ORDER BY held_at LIMIT ' . Limits::PAGE
        );
    }

    /**
     * The groups whose head has been the head longest (the groups that have waited longest for
     * one job), oldest first.
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

    /** The group's row, or null when it has no job. */
    public function group(string $queue, string $name): ?object
    {
        return $this->db->selectOne(
            'SELECT queue, name, head, tail, waiting, head_since, held_by, held_uuid, held_error, held_at
             FROM drover.groups WHERE queue = ? AND name = ?',
            [$queue, $name]
        );
    }

    /**
     * The group's jobs in the order they will run: its head (in drover.jobs), then those waiting
     * behind it by position, at most Limits::PAGE.
     *
     * @return list<object> id, position (null for the head), state, available_at, attempts, payload...
     */
    public function jobs(string $queue, string $name): array
    {
        $head = $this->db->select(
            "SELECT id, NULL::bigint AS position, CASE WHEN lease_token IS NULL THEN 'head, waiting' ELSE 'head, running' END AS state,
                    available_at, attempts, payload
             FROM drover.jobs WHERE queue = ? AND grp = ?",
            [$queue, $name]
        );
        $waiting = $this->db->select(
            "SELECT id, position, 'waiting' AS state, available_at, 0 AS attempts, payload
             FROM drover.group_jobs WHERE queue = ? AND grp = ? ORDER BY position LIMIT " . Limits::PAGE,
            [$queue, $name]
        );
        return array_map(function (object $row) {
            $decoded = json_decode($row->payload ?? '', true);
            $row->display_name = is_array($decoded) ? (string) ($decoded['displayName'] ?? '') : '';
            return $row;
        }, array_merge($head, $waiting));
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
             SELECT queue, grp, position FROM drover.group_jobs WHERE id = ?
             LIMIT 1',
            [$id, $id]
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
