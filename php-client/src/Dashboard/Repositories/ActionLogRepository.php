<?php

namespace Drover\Dashboard\Repositories;

use Drover\Dashboard\Actions\Actor;
use Illuminate\Database\ConnectionInterface;

/**
 * The audit trail's rows (drover.console_actions, migration 0014, and the keys a bulk action
 * settled, drover.console_action_jobs): an action recorded done or failed, a bulk action
 * recorded requested, one action, the newest, a bulk action's keys, and the removal of what is
 * past its retention. As the rows hold them; Dashboard\Actions\ActionLog shows them.
 */
final class ActionLogRepository
{
    public function __construct(private ConnectionInterface $db)
    {
    }

    /**
     * An action done at once by $actor, over already: `done` (or `failed`) with its outcome.
     * Returns its id.
     *
     * @param string $target what it was taken on, as JSON
     */
    public function recordDone(Actor $actor, string $verb, string $target, string $state, int $acted, string $outcome): int
    {
        return (int) $this->db->selectOne(
            "INSERT INTO drover.console_actions (actor, source, verb, target, state, acted, outcome, started_at, finished_at)
             VALUES (?, ?, ?, ?::jsonb, ?, ?, ?, now(), now()) RETURNING id",
            [$actor->name, $actor->source, $verb, $target, $state, $acted, $outcome]
        )->id;
    }

    /**
     * A bulk action, `requested`, to run on the keys up to $upto ($matched of them, when they
     * were all counted). Returns its id.
     *
     * @param string $target the search, the preview and, for a move, the queue, as JSON
     */
    public function recordRequested(Actor $actor, string $verb, string $target, ?int $matched, string $upto): int
    {
        return (int) $this->db->selectOne(
            "INSERT INTO drover.console_actions (actor, source, verb, target, state, matched, upto)
             VALUES (?, ?, ?, ?::jsonb, 'requested', ?, ?) RETURNING id",
            [$actor->name, $actor->source, $verb, $target, $matched, $upto]
        )->id;
    }

    /** Action $id's row (its target as JSON text), or null. */
    public function find(int $id): ?object
    {
        return $this->db->selectOne('SELECT * FROM drover.console_actions WHERE id = ?', [$id]);
    }

    /**
     * The newest rows, before id $before (null: the newest), at most $limit.
     *
     * @return list<object>
     */
    public function recent(int $limit, ?int $before): array
    {
        return $this->db->select(
            'SELECT * FROM drover.console_actions WHERE (?::bigint IS NULL OR id < ?::bigint) ORDER BY id DESC LIMIT ' . (int) $limit,
            [$before, $before]
        );
    }

    /**
     * The keys bulk action $id settled, batch by batch, at most $limit.
     *
     * @return list<string>
     */
    public function keys(int $id, int $limit): array
    {
        $rows = $this->db->select(
            'SELECT k FROM (SELECT unnest(keys) AS k, batch FROM drover.console_action_jobs WHERE action = ? ORDER BY batch) b LIMIT ' . (int) $limit,
            [$id]
        );
        return array_map(fn ($r) => (string) $r->k, $rows);
    }

    /** Removes the actions over (done or failed) requested more than $days days ago; how many. */
    public function deleteOverOlderThan(int $days): int
    {
        return $this->db->delete(
            "DELETE FROM drover.console_actions WHERE requested_at < now() - make_interval(days => ?) AND state IN ('done', 'failed')",
            [$days]
        );
    }
}
