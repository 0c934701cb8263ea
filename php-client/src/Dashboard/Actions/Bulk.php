<?php

namespace Drover\Dashboard\Actions;

use Drover\Dashboard\Limits;
use Drover\Dashboard\Repositories\SearchRepository;
use Drover\Dashboard\Search\JobFilter;
use Drover\Dashboard\Search\State;
use Drover\Schema\BrokerQuery;
use Illuminate\Database\ConnectionInterface;
use Illuminate\Support\Facades\Artisan;

/**
 * Carries out a bulk action (docs/dashboard.md, "Acting on all that match"): the jobs its search
 * matched, taken in key order from its cursor, Limits::ACTION_BATCH at a time, each batch in one
 * transaction with the action's row locked — so two runners of one action (a retried background
 * job) take turns and never settle a batch twice — its keys recorded (console_action_jobs) and
 * its cursor and counts moved on. Only what existed when it was confirmed (`upto`) is touched.
 * A job a worker has started is passed over, never deleted or moved under it: each statement
 * re-checks `lease_token IS NULL` on the row it changes.
 */
final class Bulk
{
    public function __construct(private ConnectionInterface $db)
    {
    }

    /**
     * Runs action $id on from where it is, until it is done or $seconds have passed (at least one
     * batch; then it is left `running` for the next call). Returns its row.
     */
    public function run(int $id, float $seconds = INF): object
    {
        $log = new ActionLog($this->db);
        $started = microtime(true);
        $this->db->update("UPDATE drover.console_actions SET state = 'running', started_at = coalesce(started_at, now()) WHERE id = ? AND state IN ('requested', 'running')", [$id]);
        // At least one batch a run, then as many as the time allows; after each, a pause of
        // Limits::ACTION_PAUSE times what the batch took (the batch counted up to a quarter
        // second), so the database and the host keep most of the time for the workers' claims
        // (bench/RESULTS.md, "The console at scale").
        while (true) {
            $t = microtime(true);
            if (!$this->batch($id) || microtime(true) - $started >= $seconds) {
                break;
            }
            usleep((int) (min(0.25, microtime(true) - $t) * Limits::ACTION_PAUSE * 1_000_000));
        }
        return $log->find($id);
    }

    /** One batch; false once the action is over (done, failed, or gone). */
    private function batch(int $id): bool
    {
        return $this->db->transaction(function () use ($id): bool {
            $action = $this->db->selectOne('SELECT * FROM drover.console_actions WHERE id = ? FOR UPDATE', [$id]);
            if ($action === null || !in_array($action->state, ['requested', 'running'], true)) {
                return false;
            }
            $target = json_decode((string) $action->target, true);
            $verb = Verb::tryFrom((string) $action->verb);
            [$filter, $problems] = JobFilter::fromQuery(is_array($target['search'] ?? null) ? $target['search'] : [], new \DateTimeZone('UTC'));
            $refusal = $verb === null ? "no such action {$action->verb}" : ($filter === null ? implode('; ', $problems) : $verb->refusal($filter->state, $target['queue'] ?? null));
            if ($refusal !== null) {
                $this->finish($id, 'failed', "drover: this action cannot be carried out: $refusal");
                return false;
            }
            $search = new SearchRepository($this->db);
            [$db, $source] = $search->sourceOf($filter->state);
            [$where, $bindings] = $source->where($filter);
            $where .= ' AND s.at <= ?::timestamptz';
            $bindings[] = (string) $action->upto;
            if ($action->cursor !== null) {
                $where .= ' AND ' . $source->afterCursor();
                $bindings[] = (string) $action->cursor;
            }
            // Taken in the source's order (its cursor column), acted on by each job's key.
            $found = $db->select("SELECT s.{$source->key} AS pos, s.key AS key FROM {$source->from} WHERE $where ORDER BY s.{$source->key} LIMIT " . Limits::ACTION_BATCH, $bindings);
            $keys = array_map(fn ($r) => (string) $r->key, $found);
            if ($keys === []) {
                $this->finish($id, 'done', $this->summary($verb, (int) $action->acted, (int) $action->passed));
                return false;
            }
            $acted = $this->apply($verb, $filter, $keys, $target['queue'] ?? null);
            $batch = (int) $this->db->selectOne('SELECT coalesce(max(batch), 0) + 1 AS n FROM drover.console_action_jobs WHERE action = ?', [$id])->n;
            if ($acted !== []) {
                $this->db->insert('INSERT INTO drover.console_action_jobs (action, batch, keys) VALUES (?, ?, ?::text[])', [$id, $batch, self::textArray($acted)]);
            }
            $this->db->update(
                'UPDATE drover.console_actions SET cursor = ?, acted = acted + ?, passed = passed + ? WHERE id = ?',
                [(string) end($found)->pos, count($acted), count($keys) - count($acted), $id]
            );
            return true;
        });
    }

    /**
     * The verb, on one batch of keys: the keys it settled.
     *
     * @param list<string> $keys
     * @return list<string>
     */
    private function apply(Verb $verb, JobFilter $filter, array $keys, ?string $queue): array
    {
        $ids = self::textArray($keys);
        $due = $filter->state === State::Delayed ? 'available_at > now()' : 'available_at <= now()';
        $settled = match ([$verb, $filter->state]) {
            [Verb::Delete, State::Pending], [Verb::Delete, State::Delayed] => $this->db->select(
                "DELETE FROM drover.jobs WHERE id = ANY(?::bigint[]) AND lease_token IS NULL AND $due RETURNING id",
                [$ids]
            ),
            // A grouped or limited job stays: its group's and limits' rows name its queue. A fair
            // queue's tag means nothing on another queue: the job is tagged as it is claimed there.
            [Verb::Move, State::Pending], [Verb::Move, State::Delayed] => $this->db->select(
                "UPDATE drover.jobs SET queue = ?, fair_tag = NULL
                 WHERE id = ANY(?::bigint[]) AND lease_token IS NULL AND $due AND grp IS NULL
                   AND limited IS NOT TRUE AND rated IS NOT TRUE AND queue <> ?
                 RETURNING id",
                [$queue, $ids, $queue]
            ),
            [Verb::Release, State::Held] => $this->releaseHeld($ids),
            [Verb::Forget, State::Kept] => $this->db->select('DELETE FROM drover.failed_jobs WHERE id = ANY(?::bigint[]) RETURNING id', [$ids]),
            // The payload as it was kept, at the back of its queue, as a new job.
            [Verb::Retry, State::Kept] => $this->db->select(
                'WITH gone AS (DELETE FROM drover.failed_jobs WHERE id = ANY(?::bigint[]) RETURNING id, queue, payload),
                      pushed AS (INSERT INTO drover.jobs (queue, payload) SELECT queue, payload FROM gone ORDER BY id)
                 SELECT id FROM gone',
                [$ids]
            ),
            [Verb::Forget, State::Failed] => array_map(fn ($k) => (object) ['id' => $k], array_values(array_filter($keys, fn ($k) => app('queue.failer')->forget($k)))),
            [Verb::Retry, State::Failed] => $this->retryFailed($keys),
        };
        return array_map(fn ($r) => (string) $r->id, $settled);
    }

    /**
     * Failed jobs pushed back onto their queues through queue:retry (the failer's own path: the
     * payload as Laravel retries it, and forgotten once pushed). A key another retry took first
     * is passed over.
     *
     * @param list<string> $keys
     * @return list<object>
     */
    private function retryFailed(array $keys): array
    {
        $failer = app('queue.failer');
        $found = array_values(array_filter($keys, fn ($k) => $failer->find($k) !== null));
        if ($found !== []) {
            Artisan::call('queue:retry', ['id' => $found]);
        }
        return array_map(fn ($k) => (object) ['id' => $k], array_values(array_filter($found, fn ($k) => $failer->find($k) === null)));
    }

    /**
     * The held groups these waiting jobs are behind, released (drover.release_held: the group
     * goes on without its failed job, which stays where the failer keeps it); the jobs behind
     * them are the ones settled. A job that waits for a limit, or behind a head that did not
     * fail, is passed over.
     *
     * @return list<object>
     */
    private function releaseHeld(string $ids): array
    {
        $rows = $this->db->select(
            'SELECT j.id, g.held_uuid FROM drover.group_jobs j
             JOIN drover.groups g ON g.queue = j.queue AND g.name = j.grp
             WHERE j.id = ANY(?::bigint[]) AND g.head IS NULL AND g.held_uuid IS NOT NULL',
            [$ids]
        );
        foreach (array_unique(array_map(fn ($r) => (string) $r->held_uuid, $rows)) as $uuid) {
            $this->db->select('SELECT drover.release_held(?)', [$uuid]);
        }
        return $rows;
    }

    private function finish(int $id, string $state, string $outcome): void
    {
        $this->db->update('UPDATE drover.console_actions SET state = ?, outcome = ?, finished_at = now() WHERE id = ?', [$state, $outcome, $id]);
    }

    private function summary(Verb $verb, int $acted, int $passed): string
    {
        $done = match ($verb) {
            Verb::Retry => 'pushed back onto their queues',
            Verb::Delete => 'deleted',
            Verb::Forget => 'forgotten',
            Verb::Move => 'moved',
            Verb::Release => 'let go on (their groups released)',
        };
        $why = match ($verb) {
            Verb::Delete, Verb::Move => 'a worker started them, they went, or (moving) they belong to a group or a limit',
            Verb::Release => 'they wait for a limit or their group was not held',
            default => 'another took them first',
        };
        return number_format($acted) . " $done" . ($passed > 0 ? '; ' . number_format($passed) . " passed over ($why)" : '');
    }

    /** @param list<string> $values */
    private static function textArray(array $values): string
    {
        return BrokerQuery::textArray($values);
    }
}
