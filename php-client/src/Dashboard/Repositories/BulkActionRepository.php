<?php

namespace Drover\Dashboard\Repositories;

use Drover\Dashboard\Actions\Previewed;
use Drover\Dashboard\Limits;
use Drover\Dashboard\Search\JobFilter;
use Drover\Dashboard\Search\State;
use Drover\Schema\BrokerQuery;
use Illuminate\Database\ConnectionInterface;

/**
 * What a bulk action reads and writes as it runs (docs/dashboard.md, "Acting on all that match";
 * Dashboard\Actions\Bulk decides): its row in drover.console_actions — state, cursor and counts —
 * locked for each batch; the next batch of what its search matched, each row saying whether the
 * preview matched it (Previewed); the keys each batch settled (drover.console_action_jobs); and
 * the statements that settle the jobs in drover's own tables, each re-checking on the row it
 * changes, under its lock, that the row is still as previewed.
 */
final class BulkActionRepository
{
    public function __construct(private ConnectionInterface $db)
    {
    }

    /** Action $id, requested or running, marked running (its start kept from an earlier run). */
    public function markRunning(int $id): void
    {
        $this->db->update("UPDATE drover.console_actions SET state = 'running', started_at = coalesce(started_at, now()) WHERE id = ? AND state IN ('requested', 'running')", [$id]);
    }

    /**
     * Runs $batch in one transaction that first locks action $id's row (FOR UPDATE), so two
     * runners of one action take turns: $batch gets the row (null: it is gone) and runs this
     * repository's statements in the same transaction; what it returns is returned.
     *
     * @template T
     * @param callable(?object): T $batch
     * @return T
     */
    public function withActionLocked(int $id, callable $batch): mixed
    {
        return $this->db->transaction(function () use ($id, $batch) {
            $action = $this->db->selectOne('SELECT * FROM drover.console_actions WHERE id = ? FOR UPDATE', [$id]);
            return $batch($action);
        });
    }

    /**
     * The next Limits::ACTION_BATCH rows $filter matches — keys up to $upto, after $cursor (null:
     * from the start) — in its source's order, on its state's connection: each its cursor `pos`,
     * its `key`, and whether the preview taken at $at with $horizon matched it (`previewed`).
     *
     * @return list<object>
     */
    public function nextMatches(JobFilter $filter, string $upto, ?string $cursor, string $at, string $horizon): array
    {
        [$db, $source] = (new SearchRepository($this->db))->sourceOf($filter->state);
        [$where, $bindings] = $source->where($filter);
        // Nothing beyond the preview's newest key.
        $where .= " AND s.{$source->key} <= ?::bigint";
        $bindings[] = $upto;
        if ($cursor !== null) {
            $where .= ' AND ' . $source->afterCursor();
            $bindings[] = $cursor;
        }
        // Taken in the source's order (its cursor column), acted on by each job's key.
        [$previewed, $previewBindings] = Previewed::condition($filter->state, $at, $horizon);
        return $db->select(
            "SELECT s.{$source->key} AS pos, s.key AS key, ($previewed) AS previewed FROM {$source->from} WHERE $where ORDER BY s.{$source->key} LIMIT " . Limits::ACTION_BATCH,
            array_merge($previewBindings, $bindings)
        );
    }

    /** The number of action $id's next batch. */
    public function nextBatch(int $id): int
    {
        return (int) $this->db->selectOne('SELECT coalesce(max(batch), 0) + 1 AS n FROM drover.console_action_jobs WHERE action = ?', [$id])->n;
    }

    /** Action $id's cursor, past a batch, and how many of it matched now but not when previewed. */
    public function moveCursor(int $id, string $cursor, int $changed): void
    {
        $this->db->update(
            "UPDATE drover.console_actions SET cursor = ?,
                    target = jsonb_set(target, '{preview,changed}', to_jsonb(coalesce((target #>> '{preview,changed}')::bigint, 0) + ?::bigint))
             WHERE id = ?",
            [$cursor, $changed, $id]
        );
    }

    /**
     * Batch $batch of action $id: the keys it settled ($acted) recorded, and its counts — acted,
     * and passed over (the rest of $keys).
     *
     * @param list<string> $keys
     * @param list<string> $acted
     */
    public function recordBatch(int $id, int $batch, array $keys, array $acted): void
    {
        if ($acted !== []) {
            $this->db->insert('INSERT INTO drover.console_action_jobs (action, batch, keys) VALUES (?, ?, ?::text[])', [$id, $batch, BrokerQuery::textArray($acted)]);
        }
        $this->db->update(
            'UPDATE drover.console_actions SET acted = acted + ?, passed = passed + ? WHERE id = ?',
            [count($acted), count($keys) - count($acted), $id]
        );
    }

    /**
     * recordBatch() in a transaction of its own (a batch settled outside the one that took it).
     *
     * @param list<string> $keys
     * @param list<string> $acted
     */
    public function recordBatchAlone(int $id, int $batch, array $keys, array $acted): void
    {
        $this->db->transaction(fn () => $this->recordBatch($id, $batch, $keys, $acted));
    }

    /**
     * Pending or delayed jobs ($state) deleted, those of $keys still waiting as previewed. A
     * workflow's steps among them are deleted as deleted, not completed: locked and noted by
     * drover.workflow_steps_deleted first, in the same transaction (their nodes fail; migration
     * 0016); a step that became deletable after the lock is spared, never deleted unnoted.
     *
     * @param list<string> $keys
     * @return list<string> the keys deleted
     */
    public function deleteWaiting(array $keys, State $state, string $horizon): array
    {
        $due = self::stillAsPreviewed($state);
        return $this->db->transaction(function () use ($keys, $due, $horizon) {
            $steps = BrokerQuery::textArray(self::keysOf($this->db->select(
                "SELECT id FROM drover.jobs WHERE id = ANY(?::bigint[]) AND lease_token IS NULL AND $due AND wf IS NOT NULL ORDER BY id FOR UPDATE",
                [BrokerQuery::textArray($keys), $horizon]
            )));
            if ($steps !== '{}') {
                $this->db->select('SELECT drover.workflow_steps_deleted(?::bigint[], ?)', [$steps, 'deleted from the console']);
            }
            return self::keysOf($this->db->select(
                "DELETE FROM drover.jobs WHERE id = ANY(?::bigint[]) AND lease_token IS NULL AND $due AND (wf IS NULL OR id = ANY(?::bigint[])) RETURNING id",
                [BrokerQuery::textArray($keys), $horizon, $steps]
            ));
        });
    }

    /**
     * Pending or delayed jobs ($state) moved to $queue, those of $keys still waiting as previewed.
     * A grouped or limited job stays: its group's and limits' rows name its queue. A fair queue's
     * tag means nothing on another queue: the job is tagged as it is claimed there.
     *
     * @param list<string> $keys
     * @return list<string> the keys moved
     */
    public function moveWaiting(array $keys, State $state, ?string $queue, string $horizon): array
    {
        $due = self::stillAsPreviewed($state);
        return self::keysOf($this->db->select(
            "UPDATE drover.jobs SET queue = ?, fair_tag = NULL
                 WHERE id = ANY(?::bigint[]) AND lease_token IS NULL AND $due AND grp IS NULL
                   AND limited IS NOT TRUE AND rated IS NOT TRUE AND queue <> ?
                 RETURNING id",
            [$queue, BrokerQuery::textArray($keys), $horizon, $queue]
        ));
    }

    /**
     * The held groups these waiting jobs are behind, released (drover.release_held: the group
     * goes on without its failed job, which stays where the failer keeps it); the jobs behind
     * them are the ones settled. A job that waits for a limit, or behind a head that did not
     * fail, is passed over.
     *
     * @param list<string> $keys
     * @return list<string> the keys let go on
     */
    public function releaseHeld(array $keys, string $horizon): array
    {
        $rows = $this->db->select(
            'SELECT j.id, g.held_uuid FROM drover.group_jobs j
             JOIN drover.groups g ON g.queue = j.queue AND g.name = j.grp
             WHERE j.id = ANY(?::bigint[]) AND g.head IS NULL AND g.held_uuid IS NOT NULL AND ' . Previewed::unchanged('j.xmin'),
            [BrokerQuery::textArray($keys), $horizon]
        );
        foreach (array_unique(array_map(fn ($r) => (string) $r->held_uuid, $rows)) as $uuid) {
            $this->db->select('SELECT drover.release_held(?)', [$uuid]);
        }
        return self::keysOf($rows);
    }

    /**
     * Kept jobs (drover.failed_jobs) forgotten, those of $keys not written since the preview. A
     * kept job's id is its job's: one kept again after a retry is a new row, not this one.
     *
     * @param list<string> $keys
     * @return list<string> the keys forgotten
     */
    public function forgetKept(array $keys, string $horizon): array
    {
        return self::keysOf($this->db->select('DELETE FROM drover.failed_jobs WHERE id = ANY(?::bigint[]) AND ' . Previewed::unchanged('xmin') . ' RETURNING id', [BrokerQuery::textArray($keys), $horizon]));
    }

    /**
     * Kept jobs pushed back: the payload as it was kept, at the back of its queue, as a new job.
     *
     * @param list<string> $keys
     * @return list<string> the keys retried
     */
    public function retryKept(array $keys, string $horizon): array
    {
        return self::keysOf($this->db->select(
            'WITH gone AS (DELETE FROM drover.failed_jobs WHERE id = ANY(?::bigint[]) AND ' . Previewed::unchanged('xmin') . ' RETURNING id, queue, payload),
                      pushed AS (INSERT INTO drover.jobs (queue, payload) SELECT queue, payload FROM gone ORDER BY id)
                 SELECT id FROM gone',
            [BrokerQuery::textArray($keys), $horizon]
        ));
    }

    /** Action $id over: $state (done or failed) with its outcome. */
    public function finish(int $id, string $state, string $outcome): void
    {
        $this->db->update('UPDATE drover.console_actions SET state = ?, outcome = ?, finished_at = now() WHERE id = ?', [$state, $outcome, $id]);
    }

    /** Action $id failed with $outcome, unless it is over already. */
    public function failUnlessOver(int $id, string $outcome): void
    {
        $this->db->update(
            "UPDATE drover.console_actions SET state = 'failed', finished_at = now(), outcome = ? WHERE id = ? AND state IN ('requested', 'running')",
            [$outcome, $id]
        );
    }

    /**
     * The condition that a waiting job is still as previewed, on the row changed, under its lock:
     * waiting (no worker has it), due or not as it was, and not written since the preview (one
     * binding, the horizon).
     */
    private static function stillAsPreviewed(State $state): string
    {
        return ($state === State::Delayed ? 'available_at > now()' : 'available_at <= now()')
            . ' AND ' . Previewed::unchanged('xmin');
    }

    /**
     * The keys of rows a statement returned.
     *
     * @param list<object> $rows
     * @return list<string>
     */
    private static function keysOf(array $rows): array
    {
        return array_map(fn ($r) => (string) $r->id, $rows);
    }
}
