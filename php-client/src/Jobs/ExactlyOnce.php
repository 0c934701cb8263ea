<?php

namespace Drover\Jobs;

/**
 * Exactly once for what a job writes (issue 59, docs/exactly-once.md), for a job class that uses
 * Laravel's InteractsWithQueue (`$this->job` is then the DroverJob the drover worker runs):
 *
 *     public function handle(): void
 *     {
 *         $charge = $this->once('charge', fn (string $key) => $this->payments->charge($this->order, idempotencyKey: $key));
 *         DB::transaction(function () use ($charge) {
 *             $this->order->update(['charge_id' => $charge->id, 'paid' => true]);
 *             $this->completeWithin();
 *         });
 *     }
 *
 * Only writes on the database connection drover's jobs live in (the drover queue connection's
 * `connection`) commit with the job's completion; writes through another connection, or to any
 * other system, are not covered (for an API, pass once()'s key as its idempotency key).
 *
 * Outside a drover worker (the sync driver, another queue connection, `dispatchSync`, a test
 * calling handle()), completeWithin() does nothing and once() just calls its callable.
 */
trait ExactlyOnce
{
    /**
     * Completes the job inside the transaction open on the connection drover's jobs live in:
     * call it as the last statement of the job's outermost `DB::transaction(...)` on that
     * connection (inside a nested one is fine: it commits with the outermost). The job's writes in
     * that transaction and its completion then commit together, or not at all. The drover worker
     * reports the job completed ("within") once that transaction has committed; a rollback after
     * the call undoes the completion with the rest, and the job is retried or failed as usual.
     * After the commit the job is complete: releasing or failing it then changes nothing, and an
     * exception it throws is only reported.
     *
     * Its lease taken back while it ran (its worker frozen or cut off), it throws LeaseTakenBack:
     * let it out of the transaction, which rolls back; the job runs where it is held now, and this
     * attempt is neither retried nor failed by Laravel.
     *
     * Nothing for a job implementing Drover\Contracts\CompletesInTransaction (its worker completes
     * it, last), nor on a second call. Outside a drover worker, nothing.
     *
     * @throws \LogicException outside a transaction on that connection, naming the fix
     * @throws LeaseTakenBack when the job's lease was taken back
     */
    public function completeWithin(): void
    {
        $job = $this->job ?? null;
        if ($job instanceof DroverJob) {
            $job->completeWithin();
        }
    }

    /**
     * Step $step, run once across the job's attempts (its retries, a `queue:retry`: every one
     * with the payload's uuid). If an earlier attempt recorded the step's result, that returns and
     * $fn is not called. Otherwise $fn is called with the step's key, `drover:{uuid}:{step}` — pass
     * it to an API as its idempotency key: an attempt killed after the call and before the record
     * calls it again with the same key — and its result is recorded in a transaction of its own, on
     * a second connection to the database (so it survives the job's transaction rolling back), and
     * returned: the result as recorded (serialize()d and back; the first recorded wins if two
     * attempts raced). The result must be serializable (no closures, no resources). An exception
     * from $fn records nothing and propagates.
     *
     * Outside a drover worker, $fn is just called, with a key built the same way from the job's
     * uuid if it has one (the sync driver's, another queue's), else from a random one.
     *
     * @param string $step the step's name, 1 to 200 characters, unique within the job
     * @param callable(string): mixed $fn
     * @throws \InvalidArgumentException for a step name that is empty or longer than 200 characters
     */
    public function once(string $step, callable $fn): mixed
    {
        DroverJob::validStep($step);
        $job = $this->job ?? null;
        if ($job instanceof DroverJob) {
            return $job->once($step, $fn);
        }
        $uuid = is_object($job) && method_exists($job, 'uuid') ? $job->uuid() : null;
        if (!is_string($uuid) || $uuid === '') {
            $bytes = random_bytes(16);
            $bytes[6] = chr(ord($bytes[6]) & 0x0f | 0x40);
            $bytes[8] = chr(ord($bytes[8]) & 0x3f | 0x80);
            $uuid = vsprintf('%s%s-%s-%s-%s-%s%s%s', str_split(bin2hex($bytes), 4));
        }
        return $fn(DroverJob::stepKey($uuid, $step));
    }
}
