<?php

namespace Drover\Dashboard\Actions;

use Drover\Dashboard\Limits;
use Drover\Dashboard\Redaction;
use Drover\Dashboard\Repositories\SearchRepository;
use Drover\Dashboard\Search\JobFilter;
use Drover\Dashboard\Search\State;
use Drover\Schema\BrokerQuery;
use Illuminate\Database\ConnectionInterface;
use Illuminate\Support\Facades\Artisan;

/**
 * Carries out a bulk action (docs/dashboard.md, "Acting on all that match"): the jobs its search
 * matched when it was previewed, taken in key order from its cursor, Limits::ACTION_BATCH at a
 * time, each batch in one transaction with the action's row locked — so two runners of one
 * action (a retried background job) take turns and never settle a batch twice — its keys
 * recorded (console_action_jobs) and its cursor and counts moved on.
 *
 * Only what the preview matched is touched (Previewed: keys up to the preview's newest, rows not
 * written since it, pending or delayed as they were then); a job that matches now but did not
 * then — dispatched, due, released or changed since — is counted (`changed`) and left alone. A
 * job a worker has started is passed over, never deleted or moved under it: each statement
 * re-checks, on the row it changes, under its lock, that it is still as previewed.
 *
 * The search's free-text filters are not in the action's row (the audit trail withholds them,
 * Redaction::search); they come from the background job that runs it ($withheld).
 */
final class Bulk
{
    public function __construct(private ConnectionInterface $db)
    {
    }

    /**
     * Runs action $id on from where it is, until it is done or $seconds have passed (at least one
     * batch; then it is left `running` for the next call). Returns its row.
     *
     * @param array<string, string> $withheld the search's free-text filters (text, exception),
     *        which its row keeps as Redaction::WITHHELD
     */
    public function run(int $id, float $seconds = INF, array $withheld = []): object
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
            if (!$this->batch($id, $withheld) || microtime(true) - $started >= $seconds) {
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
    private function batch(int $id, array $withheld): bool
    {
        $taken = $this->db->transaction(function () use ($id, $withheld) {
            $action = $this->db->selectOne('SELECT * FROM drover.console_actions WHERE id = ? FOR UPDATE', [$id]);
            if ($action === null || !in_array($action->state, ['requested', 'running'], true)) {
                return false;
            }
            $target = json_decode((string) $action->target, true);
            $verb = Verb::tryFrom((string) $action->verb);
            [$query, $refusal] = self::search(is_array($target['search'] ?? null) ? $target['search'] : [], $withheld);
            $preview = is_array($target['preview'] ?? null) ? $target['preview'] : null;
            // Read in the zone the search was previewed in (the application's).
            [$filter, $problems] = $refusal === null ? JobFilter::fromQuery($query, self::zone()) : [null, []];
            $refusal ??= $verb === null ? "no such action {$action->verb}" : ($filter === null ? implode('; ', $problems) : $verb->refusal($filter->state, $target['queue'] ?? null));
            if ($refusal === null && (!is_string($action->upto) || !ctype_digit($action->upto))) {
                $refusal = 'it names no last job to act on (`upto`)';
            }
            if ($refusal === null && (!is_string($preview['at'] ?? null) || !is_string($preview['horizon'] ?? null) || !ctype_digit($preview['horizon']))) {
                $refusal = 'it carries no preview (it was confirmed by an older drover, or not from the confirmation page): search again, preview and confirm';
            }
            if ($refusal !== null) {
                $this->finish($id, 'failed', "drover: this action cannot be carried out: $refusal");
                return false;
            }
            $search = new SearchRepository($this->db);
            [$db, $source] = $search->sourceOf($filter->state);
            [$where, $bindings] = $source->where($filter);
            // Nothing beyond the preview's newest key.
            $where .= " AND s.{$source->key} <= ?::bigint";
            $bindings[] = (string) $action->upto;
            if ($action->cursor !== null) {
                $where .= ' AND ' . $source->afterCursor();
                $bindings[] = (string) $action->cursor;
            }
            // Taken in the source's order (its cursor column), acted on by each job's key; each
            // row says whether the preview matched it (Previewed).
            [$previewed, $previewBindings] = Previewed::condition($filter->state, $preview['at'], $preview['horizon']);
            $found = $db->select(
                "SELECT s.{$source->key} AS pos, s.key AS key, ($previewed) AS previewed FROM {$source->from} WHERE $where ORDER BY s.{$source->key} LIMIT " . Limits::ACTION_BATCH,
                array_merge($previewBindings, $bindings)
            );
            if ($found === []) {
                $this->finish($id, 'done', $this->summary($verb, $action, $preview));
                return false;
            }
            $keys = array_map(fn ($r) => (string) $r->key, array_values(array_filter($found, fn ($r) => (bool) $r->previewed)));
            $changed = count($found) - count($keys);
            $batch = (int) $this->db->selectOne('SELECT coalesce(max(batch), 0) + 1 AS n FROM drover.console_action_jobs WHERE action = ?', [$id])->n;
            $cursor = (string) end($found)->pos;
            if ($filter->state === State::Failed) {
                // Taken now, settled after this transaction (see above).
                $this->move($id, $cursor, $changed);
                return [$verb, $keys, $batch];
            }
            $acted = $keys === [] ? [] : $this->apply($verb, $filter, $keys, $target['queue'] ?? null, $preview);
            $this->record($id, $batch, $keys, $acted);
            $this->move($id, $cursor, $changed);
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

    /**
     * The search to run: its row's query with the withheld free-text filters put back, or why it
     * cannot be run.
     *
     * @param array<string, mixed> $stored
     * @param array<string, string> $withheld
     * @return array{0: array<string, mixed>, 1: ?string}
     */
    private static function search(array $stored, array $withheld): array
    {
        foreach (Redaction::WITHHELD_FILTERS as $name) {
            if (($stored[$name] ?? null) !== Redaction::WITHHELD) {
                continue;
            }
            if (!is_string($withheld[$name] ?? null) || $withheld[$name] === '') {
                return [$stored, "its `$name` filter is withheld from the audit trail and did not come with the job that runs it: search again, preview and confirm"];
            }
            $stored[$name] = $withheld[$name];
        }
        return [$stored, null];
    }

    /** The cursor past a batch, and how many of it matched now but not when previewed. */
    private function move(int $id, string $cursor, int $changed): void
    {
        $this->db->update(
            "UPDATE drover.console_actions SET cursor = ?,
                    target = jsonb_set(target, '{preview,changed}', to_jsonb(coalesce((target #>> '{preview,changed}')::bigint, 0) + ?::bigint))
             WHERE id = ?",
            [$cursor, $changed, $id]
        );
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
    private function apply(Verb $verb, JobFilter $filter, array $keys, ?string $queue, array $preview): array
    {
        $ids = self::textArray($keys);
        // Still as previewed, on the row changed, under its lock: waiting (no worker has it), due
        // or not as it was, and not written since the preview.
        $due = ($filter->state === State::Delayed ? 'available_at > now()' : 'available_at <= now()')
            . ' AND ' . Previewed::unchanged('xmin');
        $horizon = (string) $preview['horizon'];
        $settled = match ([$verb, $filter->state]) {
            // Failed jobs are settled outside the batch's transaction (batch()).
            [Verb::Delete, State::Pending], [Verb::Delete, State::Delayed] => $this->db->select(
                "DELETE FROM drover.jobs WHERE id = ANY(?::bigint[]) AND lease_token IS NULL AND $due RETURNING id",
                [$ids, $horizon]
            ),
            // A grouped or limited job stays: its group's and limits' rows name its queue. A fair
            // queue's tag means nothing on another queue: the job is tagged as it is claimed there.
            [Verb::Move, State::Pending], [Verb::Move, State::Delayed] => $this->db->select(
                "UPDATE drover.jobs SET queue = ?, fair_tag = NULL
                 WHERE id = ANY(?::bigint[]) AND lease_token IS NULL AND $due AND grp IS NULL
                   AND limited IS NOT TRUE AND rated IS NOT TRUE AND queue <> ?
                 RETURNING id",
                [$queue, $ids, $horizon, $queue]
            ),
            [Verb::Release, State::Held] => $this->releaseHeld($ids, $horizon),
            // A kept job's id is its job's: one kept again after a retry is a new row, not this one.
            [Verb::Forget, State::Kept] => $this->db->select('DELETE FROM drover.failed_jobs WHERE id = ANY(?::bigint[]) AND ' . Previewed::unchanged('xmin') . ' RETURNING id', [$ids, $horizon]),
            // The payload as it was kept, at the back of its queue, as a new job.
            [Verb::Retry, State::Kept] => $this->db->select(
                'WITH gone AS (DELETE FROM drover.failed_jobs WHERE id = ANY(?::bigint[]) AND ' . Previewed::unchanged('xmin') . ' RETURNING id, queue, payload),
                      pushed AS (INSERT INTO drover.jobs (queue, payload) SELECT queue, payload FROM gone ORDER BY id)
                 SELECT id FROM gone',
                [$ids, $horizon]
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
    private function releaseHeld(string $ids, string $horizon): array
    {
        $rows = $this->db->select(
            'SELECT j.id, g.held_uuid FROM drover.group_jobs j
             JOIN drover.groups g ON g.queue = j.queue AND g.name = j.grp
             WHERE j.id = ANY(?::bigint[]) AND g.head IS NULL AND g.held_uuid IS NOT NULL AND ' . Previewed::unchanged('j.xmin'),
            [$ids, $horizon]
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

    /**
     * The outcome, in words: what was done to the previewed jobs, what of them was passed over or
     * no longer matched, and what matched now but not when previewed (left alone).
     */
    private function summary(Verb $verb, object $action, array $preview): string
    {
        $acted = (int) $action->acted;
        $passed = (int) $action->passed;
        $changed = (int) ($preview['changed'] ?? 0);
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
        $counted = is_int($preview['count'] ?? null) ? (int) $preview['count'] : null;
        $of = $counted === null ? ' (the preview did not count them all)' : ' of the ' . number_format($counted) . ' previewed';
        $words = number_format($acted) . " $done$of" . ($passed > 0 ? '; ' . number_format($passed) . " passed over ($why)" : '');
        if ($counted !== null && ($preview['exact'] ?? false) && $counted - $acted - $passed > 0) {
            $words .= '; ' . number_format($counted - $acted - $passed) . ' no longer matched (gone, started, or changed since the preview)';
        }
        if ($changed > 0) {
            $words .= '; ' . number_format($changed) . ' that match now but did not when previewed (dispatched before it but due, released or changed since) were not touched';
        }
        return $words;
    }

    /** @param list<string> $values */
    private static function textArray(array $values): string
    {
        return BrokerQuery::textArray($values);
    }
}
