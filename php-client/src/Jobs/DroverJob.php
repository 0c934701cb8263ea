<?php

namespace Drover\Jobs;

use Drover\Contracts\CompletesInTransaction;
use Drover\Worker\Feeder;
use Illuminate\Container\Container;
use Illuminate\Database\ConnectionInterface;
use Illuminate\Contracts\Queue\Job as JobContract;
use Illuminate\Queue\Jobs\Job;

/**
 * A Laravel job pushed by the drover master. delete(), release() and fail() report to the master
 * instead of writing to a table; the master settles the lease.
 *
 * Exactly once for what a job writes (issue 59, docs/exactly-once.md): a job implementing
 * Contracts\CompletesInTransaction runs inside one transaction on the connection drover's jobs live
 * in, completed in it (fireInTransaction()); a job using Jobs\ExactlyOnce completes inside its own
 * transaction (completeWithin()) and runs steps once across its attempts (once()). A completion
 * written and committed is reported as `done` with `within` (protocol 4).
 */
class DroverJob extends Job implements JobContract
{
    /**
     * @param array<string, mixed> $frame the master's `job` frame
     */
    public function __construct(
        Container $container,
        protected Feeder $feeder,
        protected array $frame,
        string $connectionName,
        /** The worker's completions (LaravelWorker), on the connection drover's jobs live in. */
        protected ?Completions $completions = null,
    ) {
        $this->container = $container;
        $this->connectionName = $connectionName;
        $this->queue = $frame['queue'];
    }

    public function getJobId()
    {
        return (string) $this->frame['job'];
    }

    public function getRawBody()
    {
        return $this->frame['payload'];
    }

    /**
     * The payload, decoded once. Laravel's Job decodes the raw body on every call, and a job's
     * way through the worker calls it several times (its name, tries, timeout, backoff, events,
     * the handler). The body of a drover job never changes, and an array is handed out as a copy.
     */
    public function payload()
    {
        if (!$this->payloadDecoded) {
            $this->decodedPayload = json_decode($this->getRawBody(), true);
            $this->payloadDecoded = true;
        }
        return $this->decodedPayload;
    }

    /** What payload() decoded (whatever json_decode gave, null included). */
    private mixed $decodedPayload = null;

    /** payload() has decoded the body. */
    private bool $payloadDecoded = false;

    public function attempts()
    {
        return (int) $this->frame['attempts'];
    }

    /** Set while Laravel's failure path runs, so its delete() is not reported as done. */
    protected bool $failing = false;

    public function fail($e = null)
    {
        if ($this->completedWithin()) {
            $this->completeInstead('failed');
            return;
        }
        $this->failing = true;
        parent::fail($e);
    }

    /**
     * Completed (or failed: then the failure is reported once the failer has logged it). Inside
     * the worker's transaction of a CompletesInTransaction job, `done` waits for its commit
     * (fireInTransaction()); after completeWithin() it says `within` once that transaction
     * committed, and waits while it is still open (fire() settles it).
     */
    public function delete()
    {
        parent::delete();
        if ($this->failing || $this->hasFailed() || $this->inWorkerTransaction) {
            return;
        }
        $within = $this->completions?->committed($this->id(), $this->leaseToken());
        if ($within === false) {
            return;
        }
        $this->feeder->done(within: $within === true);
    }

    public function release($delay = 0)
    {
        if ($this->completedWithin()) {
            $this->completeInstead('released');
            return;
        }
        parent::release($delay);
        $this->feeder->release((float) $this->secondsUntil($delay));
    }

    /** Called after Laravel's failer logged the failure: the master deletes the job. */
    public function reportFailure(\Throwable $e): void
    {
        $this->feeder->fail(get_class($e) . ': ' . $e->getMessage(), logged: true);
    }

    public function getFeeder(): Feeder
    {
        return $this->feeder;
    }

    /**
     * How the worker running this job's previous attempt died (`was killed by SIGSEGV`), if that
     * is how the attempt ended: named when Laravel's tries fail the job now.
     */
    public function previousDeath(): ?string
    {
        $died = $this->frame['died'] ?? null;
        return is_string($died) ? $died : null;
    }

    /** Why the master wants this job failed without running it (`timeout`, `max_attempts`), if so. */
    public function failureRequested(): ?string
    {
        return $this->frame['fail'] ?? null;
    }

    /** The lease's fencing token the master handed this job with. */
    public function leaseToken(): int
    {
        return (int) $this->frame['token'];
    }

    /**
     * The connection drover's jobs live in (the worker's, Jobs\Completions): where a step's
     * result is recorded, inside the job's own transaction when it has one open. Null for a
     * DroverJob made without the worker's completions.
     */
    public function database(): ?ConnectionInterface
    {
        return $this->completions?->connection();
    }

    /**
     * A connection to that database outside any transaction the job holds open on it: the same
     * connection when none is open, else the worker's second one (Completions::autonomous()) —
     * for what must be seen before the job commits (its progress). Null without completions.
     */
    public function databaseOutsideTransaction(): ?ConnectionInterface
    {
        $db = $this->database();
        if ($db === null || $db->transactionLevel() === 0) {
            return $db;
        }
        return $this->completions->autonomous();
    }

    private function id(): int
    {
        return (int) $this->frame['job'];
    }

    /** The worker's transaction of a CompletesInTransaction job is open (fireInTransaction()). */
    private bool $inWorkerTransaction = false;

    /** The worker's transaction completed this job and committed. */
    private bool $completedInWorkerTransaction = false;

    /**
     * Released or failed after its completion committed: the job is complete (its row is gone,
     * its writes committed), and is reported so; no failure path.
     */
    private function completeInstead(string $asked): void
    {
        fwrite(STDERR, "drover worker: job {$this->id()} ({$this->resolveName()}) was $asked after its completion committed; it is complete\n");
        parent::delete();
        $this->feeder->done(within: true);
    }

    /** Whether the job's class implements CompletesInTransaction (the payload's commandName). */
    public function completesInTransaction(): bool
    {
        $payload = $this->payload();
        $name = is_array($payload) ? ($payload['data']['commandName'] ?? null) : null;
        return is_string($name) && is_a($name, CompletesInTransaction::class, true);
    }

    /**
     * Whether this job's completion was written in a transaction that committed: the job is
     * complete, whatever it does or throws after.
     */
    public function completedWithin(): bool
    {
        return $this->completedInWorkerTransaction
            || $this->completions?->committed($this->id(), $this->leaseToken()) === true;
    }

    /**
     * Runs the job. A CompletesInTransaction job runs inside the worker's transaction
     * (fireInTransaction()). Any other job that called completeWithin() must have ended that
     * transaction by the time its handler returns: one left open (it would keep the job's row
     * locked, and the master waiting on it) is rolled back, and the attempt fails as a throw would.
     */
    public function fire()
    {
        if ($this->completesInTransaction()) {
            $this->fireInTransaction();
            return;
        }
        try {
            parent::fire();
        } catch (\Throwable $e) {
            $this->rollBackOpenCompletion();
            throw $e;
        }
        if ($this->rollBackOpenCompletion()) {
            throw new \LogicException(
                "drover: job {$this->id()} ({$this->resolveName()}) returned with the transaction it called completeWithin() in still open "
                . "on connection {$this->completions->connectionName()}; it was rolled back with the job's writes in it. Commit it before the "
                . "handler returns: call completeWithin() last inside DB::connection('{$this->completions->connectionName()}')->transaction(function () { ... })."
            );
        }
    }

    /**
     * A completion written in a transaction still open (the handler returned or threw without
     * ending it): every transaction of the connection is rolled back, and the job not taken for
     * deleted. Whether there was one.
     */
    private function rollBackOpenCompletion(): bool
    {
        if ($this->completions === null || $this->completions->committed($this->id(), $this->leaseToken()) !== false) {
            return false;
        }
        self::rollBackAll($this->completions->connection());
        $this->completions->forget($this->id(), $this->leaseToken());
        if (!$this->hasFailed() && !$this->isReleased()) {
            $this->deleted = false;
        }
        return true;
    }

    /**
     * A CompletesInTransaction job: its handler runs inside one transaction on the connection
     * drover's jobs live in, and, when it completed (deleted by Laravel, neither released nor
     * failed), `drover.complete_within` is the last statement before the commit; then `done` with
     * `within`. Released or failed, its writes commit without a completion (Laravel's semantics)
     * and the release or failure is reported once they have. Anything thrown rolls everything
     * back and goes on to Laravel's retry / fail path; the database refusing the completion (the
     * lease was taken back) becomes LeaseTakenBack, which the worker reports as a release
     * (LaravelWorker::handleJobException).
     */
    protected function fireInTransaction(): void
    {
        if ($this->completions === null) {
            throw new \LogicException("drover: job {$this->id()} ({$this->resolveName()}) implements CompletesInTransaction, but this DroverJob was made without the worker's completions (Drover\\Jobs\\Completions)");
        }
        $db = $this->completions->connection();
        if ($db->transactionLevel() > 0) {
            fwrite(STDERR, "drover worker: connection {$this->completions->connectionName()} had a transaction open before job {$this->id()} started (an earlier job or a listener left it open); rolled it back\n");
            self::rollBackAll($db);
        }
        $this->feeder->holdOutcome();
        $this->inWorkerTransaction = true;
        $completes = false;
        try {
            $db->beginTransaction();
            parent::fire();
            if ($db->transactionLevel() !== 1) {
                throw new \LogicException(
                    "drover: job {$this->id()} ({$this->resolveName()}) implements CompletesInTransaction but "
                    . ($db->transactionLevel() > 1 ? 'returned with a transaction of its own still open' : 'ended the worker\'s transaction itself')
                    . " on connection {$this->completions->connectionName()}: the worker runs its handler inside one transaction and commits it; "
                    . 'use DB::transaction(function () { ... }) inside it (a savepoint), never a bare commit or rollback'
                );
            }
            $completes = $this->isDeleted() && !$this->isReleased() && !$this->hasFailed();
            if ($completes) {
                $this->completions->completeWithin($this->id(), $this->leaseToken());
            }
            $db->commit();
        } catch (\Throwable $e) {
            self::rollBackAll($db);
            $this->inWorkerTransaction = false;
            if ($this->isDeleted() && !$this->hasFailed()) {
                $this->deleted = false; // it did not complete
            }
            $this->feeder->sendHeldOutcome();
            throw LeaseTakenBack::from($e, $this) ?? $e;
        }
        $this->inWorkerTransaction = false;
        if ($completes) {
            $this->completedInWorkerTransaction = true;
            $this->feeder->done(within: true);
        }
        $this->feeder->sendHeldOutcome();
    }

    /**
     * Rolls back every transaction open on $db. One whose rollback fails (its COMMIT failed, the
     * connection is gone) is ended by disconnecting: Laravel reconnects on the next statement.
     */
    private static function rollBackAll(ConnectionInterface $db): void
    {
        try {
            $db->rollBack(0);
        } catch (\Throwable) {
            if ($db instanceof \Illuminate\Database\Connection) {
                $db->disconnect();
            }
        }
    }

    /**
     * Completes this job inside the transaction open on the connection drover's jobs live in
     * (ExactlyOnce::completeWithin()); it counts, and `done` says `within`, once that transaction
     * committed. Nothing for a CompletesInTransaction job (the worker completes it, last) or when
     * already called in this attempt.
     *
     * @throws \LogicException outside a transaction on that connection
     * @throws LeaseTakenBack when the lease was taken back (the transaction must roll back)
     */
    public function completeWithin(): void
    {
        if ($this->completesInTransaction()) {
            return;
        }
        if ($this->completions === null) {
            throw new \LogicException("drover: job {$this->id()} ({$this->resolveName()}) called completeWithin(), but this DroverJob was made without the worker's completions (Drover\\Jobs\\Completions)");
        }
        if ($this->completions->committed($this->id(), $this->leaseToken()) !== null) {
            return;
        }
        $name = $this->completions->connectionName();
        if ($this->completions->connection()->transactionLevel() < 1) {
            throw new \LogicException(
                "drover: job {$this->id()} ({$this->resolveName()}) called completeWithin() outside a transaction on connection $name, the one drover's jobs live in: "
                . "call it last inside DB::connection('$name')->transaction(function () { ... }), so that the job's writes and its completion commit together "
                . '(or implement Drover\Contracts\CompletesInTransaction, and the worker runs the whole handler in that transaction)'
            );
        }
        if (!$this->completions->canWatch()) {
            throw new \LogicException("drover: job {$this->id()} ({$this->resolveName()}) called completeWithin(), but connection $name has no event dispatcher to tell when its transaction commits");
        }
        try {
            $this->completions->completeWithin($this->id(), $this->leaseToken());
        } catch (\Throwable $e) {
            throw LeaseTakenBack::from($e, $this) ?? $e;
        }
        $this->completions->watch($this->id(), $this->leaseToken());
    }

    /**
     * Step $step of this job, run once across its attempts (ExactlyOnce::once()): the result an
     * earlier attempt recorded, or $fn's, called with the step's key and recorded in its own
     * transaction (on a second connection), which survives the job's rolling back. What was
     * recorded returns (the first recorded wins).
     */
    public function once(string $step, callable $fn): mixed
    {
        $step = self::validStep($step);
        $uuid = $this->uuid();
        if (!is_string($uuid) || $uuid === '' || mb_strlen($uuid, 'UTF-8') > 200) {
            throw new \LogicException("drover: job {$this->id()} ({$this->resolveName()}) has no uuid of 1 to 200 characters in its payload, by which once() records its steps across attempts (Laravel's payloads have one: was it pushed raw?)");
        }
        if ($this->completions === null) {
            throw new \LogicException("drover: job {$this->id()} ({$this->resolveName()}) called once(), but this DroverJob was made without the worker's completions (Drover\\Jobs\\Completions)");
        }
        $recorded = $this->completions->stepResult($uuid, $step);
        if ($recorded !== null) {
            return self::decodeStep($recorded, $uuid, $step);
        }
        $result = $fn(self::stepKey($uuid, $step));
        return self::decodeStep($this->completions->recordStep($uuid, $step, self::encodeStep($result)), $uuid, $step);
    }

    /** The key of step $step of the job of payload uuid $uuid: `drover:{uuid}:{step}`, for an API's idempotency key. */
    public static function stepKey(string $uuid, string $step): string
    {
        return "drover:$uuid:$step";
    }

    /**
     * $step, checked: 1 to 200 characters of UTF-8 (drover.job_steps.step).
     *
     * @throws \InvalidArgumentException
     */
    public static function validStep(string $step): string
    {
        if (preg_match('//u', $step) !== 1) {
            throw new \InvalidArgumentException('drover: a step\'s name (once()) must be UTF-8 text, got bytes that are not');
        }
        $length = mb_strlen($step, 'UTF-8');
        if ($length < 1 || $length > 200) {
            throw new \InvalidArgumentException(
                'drover: a step\'s name (once()) must be 1 to 200 characters, got '
                . ($length === 0 ? 'an empty one' : "$length: '" . mb_substr($step, 0, 40, 'UTF-8') . '…\'')
            );
        }
        return $step;
    }

    /**
     * A step's result as drover.job_steps keeps it: PHP's serialize(), or, when that holds bytes
     * text cannot (NUL, in an object's private or protected properties, or invalid UTF-8), its
     * base64 behind `base64:` (which no serialize() output starts with).
     */
    private static function encodeStep(mixed $result): string
    {
        $serialized = serialize($result);
        return str_contains($serialized, "\0") || preg_match('//u', $serialized) !== 1
            ? 'base64:' . base64_encode($serialized)
            : $serialized;
    }

    private static function decodeStep(string $stored, string $uuid, string $step): mixed
    {
        $serialized = str_starts_with($stored, 'base64:') ? base64_decode(substr($stored, 7), true) : $stored;
        $result = is_string($serialized) ? @unserialize($serialized) : false;
        if ($result === false && $serialized !== serialize(false)) {
            throw new \UnexpectedValueException("drover: the result recorded for step '$step' of job uuid $uuid (drover.job_steps) cannot be unserialized (a class it holds is gone?)");
        }
        return $result;
    }
}
