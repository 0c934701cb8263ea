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
 * its cursor and counts moved on. Only what existed when it was confirmed (`upto`: the newest key
 * then) is touched.
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

    /**
     * One batch; false once the action is over (done, failed, or gone). Jobs in drover's own
     * tables are settled in the transaction that moves the cursor. Failed jobs live in Laravel's
     * failer, on connections of their own, so their batch is taken first (its cursor moved and
     * its keys recorded in one transaction), then retried or forgotten one by one outside it,
     * each failure of one counted as passed over: a worker killed in between leaves those jobs
     * in the failer, never half retried.
     */
    private function batch(int $id): bool
    {
        $taken = $this->db->transaction(function () use ($id) {
            $action = $this->db->selectOne('SELECT * FROM drover.console_actions WHERE id = ? FOR UPDATE', [$id]);
            if ($action === null || !in_array($action->state, ['requested', 'running'], true)) {
                return false;
            }
            $target = json_decode((string) $action->target, true);
            $verb = Verb::tryFrom((string) $action->verb);
            // Read in the zone the search was previewed in (the application's).
            [$filter, $problems] = JobFilter::fromQuery(is_array($target['search'] ?? null) ? $target['search'] : [], self::zone());
            $refusal = $verb === null ? "no such action {$action->verb}" : ($filter === null ? implode('; ', $problems) : $verb->refusal($filter->state, $target['queue'] ?? null));
            if ($refusal === null && (!is_string($action->upto) || !ctype_digit($action->upto))) {
                $refusal = 'it names no last job to act on (`upto`)';
            }
            if ($refusal !== null) {
                $this->finish($id, 'failed', "drover: this action cannot be carried out: $refusal");
                return false;
            }
            $search = new SearchRepository($this->db);
            [$db, $source] = $search->sourceOf($filter->state);
            [$where, $bindings] = $source->where($filter);
            // Only what existed when it was confirmed: keys up to the newest then.
            $where .= " AND s.{$source->key} <= ?::bigint";
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
            $batch = (int) $this->db->selectOne('SELECT coalesce(max(batch), 0) + 1 AS n FROM drover.console_action_jobs WHERE action = ?', [$id])->n;
            $cursor = (string) end($found)->pos;
            if ($filter->state === State::Failed) {
                // Taken now, settled after this transaction (see above).
                $this->db->update('UPDATE drover.console_actions SET cursor = ? WHERE id = ?', [$cursor, $id]);
                return [$verb, $keys, $batch];
            }
            $acted = $this->apply($verb, $filter, $keys, $target['queue'] ?? null);
            $this->record($id, $batch, $keys, $acted);
            $this->db->update('UPDATE drover.console_actions SET cursor = ? WHERE id = ?', [$cursor, $id]);
            return true;
        });
        if (!is_array($taken)) {
            return $taken;
        }
        [$verb, $keys, $batch] = $taken;
        $acted = $verb === Verb::Retry ? $this->retryFailed($keys) : $this->forgetFailed($keys);
        $this->db->transaction(fn () => $this->record($id, $batch, $keys, $acted));
        return true;
    }

    /** The application's time zone (UTC outside an application). */
    private static function zone(): \DateTimeZone
    {
        $zone = app()->bound('config') ? config('app.timezone') : null;
        return new \DateTimeZone(is_string($zone) && $zone !== '' ? $zone : 'UTC');
    }

    /** A batch's outcome: the keys it settled, and its counts. */
    private function record(int $id, int $batch, array $keys, array $acted): void
    {
        if ($acted !== []) {
            $this->db->insert('INSERT INTO drover.console_action_jobs (action, batch, keys) VALUES (?, ?, ?::text[])', [$id, $batch, self::textArray($acted)]);
        }
        $this->db->update(
            'UPDATE drover.console_actions SET acted = acted + ?, passed = passed + ? WHERE id = ?',
            [count($acted), count($keys) - count($acted), $id]
        );
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
            // Failed jobs are settled outside the batch's transaction (batch()).
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
        };
        return array_map(fn ($r) => (string) $r->id, $settled);
    }

    /**
     * Failed jobs pushed back onto their queues through queue:retry (the failer's own path: the
     * payload as Laravel retries it, and forgotten once pushed), one by one: a job another retry
     * took first, or one whose retry fails (its connection down), is passed over and stays in
     * the failer.
     *
     * @param list<string> $keys
     * @return list<string> the keys retried
     */
    private function retryFailed(array $keys): array
    {
        $failer = app('queue.failer');
        $retried = [];
        foreach ($keys as $key) {
            try {
                if ($failer->find($key) === null) {
                    continue;
                }
                Artisan::call('queue:retry', ['id' => [$key]]);
                if ($failer->find($key) === null) {
                    $retried[] = $key;
                }
            } catch (\Throwable $e) {
                report($e);
            }
        }
        return $retried;
    }

    /**
     * Failed jobs forgotten through the failer (queue:forget's path; a held group is released
     * with it), one by one.
     *
     * @param list<string> $keys
     * @return list<string> the keys forgotten
     */
    private function forgetFailed(array $keys): array
    {
        $failer = app('queue.failer');
        $forgotten = [];
        foreach ($keys as $key) {
            try {
                if ($failer->forget($key)) {
                    $forgotten[] = $key;
                }
            } catch (\Throwable $e) {
                report($e);
            }
        }
        return $forgotten;
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
