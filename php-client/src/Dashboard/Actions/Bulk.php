<?php

namespace Drover\Dashboard\Actions;

use Drover\Dashboard\Limits;
use Drover\Dashboard\Redaction;
use Drover\Dashboard\Repositories\BulkActionRepository;
use Drover\Dashboard\Search\JobFilter;
use Drover\Dashboard\Search\State;
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
 *
 * Its statements are BulkActionRepository's; here, what to do with what they find.
 */
final class Bulk
{
    private BulkActionRepository $actions;

    private ActionLog $log;

    public function __construct(ConnectionInterface $db)
    {
        $this->actions = new BulkActionRepository($db);
        $this->log = new ActionLog($db);
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
        $started = microtime(true);
        $this->actions->markRunning($id);
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
        return $this->log->find($id);
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
        $taken = $this->actions->withActionLocked($id, function (?object $action) use ($id, $withheld) {
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
                $this->actions->finish($id, 'failed', "drover: this action cannot be carried out: $refusal");
                return false;
            }
            // Taken in the source's order (its cursor column), acted on by each job's key; each
            // row says whether the preview matched it (Previewed).
            $found = $this->actions->nextMatches($filter, (string) $action->upto, $action->cursor === null ? null : (string) $action->cursor, $preview['at'], $preview['horizon']);
            if ($found === []) {
                $this->actions->finish($id, 'done', $this->summary($verb, $action, $preview));
                return false;
            }
            $keys = array_map(fn ($r) => (string) $r->key, array_values(array_filter($found, fn ($r) => (bool) $r->previewed)));
            $changed = count($found) - count($keys);
            $batch = $this->actions->nextBatch($id);
            $cursor = (string) end($found)->pos;
            if ($filter->state === State::Failed) {
                // Taken now, settled after this transaction (see above).
                $this->actions->moveCursor($id, $cursor, $changed);
                return [$verb, $keys, $batch];
            }
            $acted = $keys === [] ? [] : $this->apply($verb, $filter, $keys, $target['queue'] ?? null, $preview);
            $this->actions->recordBatch($id, $batch, $keys, $acted);
            $this->actions->moveCursor($id, $cursor, $changed);
            return true;
        });
        if (!is_array($taken)) {
            return $taken;
        }
        [$verb, $keys, $batch] = $taken;
        $acted = $verb === Verb::Retry ? $this->retryFailed($keys) : $this->forgetFailed($keys);
        $this->actions->recordBatchAlone($id, $batch, $keys, $acted);
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

    /** The application's time zone (UTC outside an application). */
    private static function zone(): \DateTimeZone
    {
        $zone = app()->bound('config') ? config('app.timezone') : null;
        return new \DateTimeZone(is_string($zone) && $zone !== '' ? $zone : 'UTC');
    }

    /**
     * The verb, on one batch of keys: the keys it settled.
     *
     * @param list<string> $keys
     * @return list<string>
     */
    private function apply(Verb $verb, JobFilter $filter, array $keys, ?string $queue, array $preview): array
    {
        $horizon = (string) $preview['horizon'];
        return match ([$verb, $filter->state]) {
            // Failed jobs are settled outside the batch's transaction (batch()).
            [Verb::Delete, State::Pending], [Verb::Delete, State::Delayed] => $this->actions->deleteWaiting($keys, $filter->state, $horizon),
            [Verb::Move, State::Pending], [Verb::Move, State::Delayed] => $this->actions->moveWaiting($keys, $filter->state, $queue, $horizon),
            [Verb::Release, State::Held] => $this->actions->releaseHeld($keys, $horizon),
            [Verb::Forget, State::Kept] => $this->actions->forgetKept($keys, $horizon),
            [Verb::Retry, State::Kept] => $this->actions->retryKept($keys, $horizon),
        };
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
}
