<?php

namespace Drover\Contracts;

/**
 * A job whose writes and whose completion commit together (issue 59, docs/exactly-once.md): the
 * drover worker runs its handler inside one transaction on the database connection drover's jobs
 * live in (the drover queue connection's `connection`), and completes the job there as the last
 * statement before the commit (`drover.complete_within`, fenced by the job's lease). Either both
 * commit or neither does; a worker whose lease was taken back while it ran (frozen, cut off, its
 * master declared gone) cannot commit: its writes roll back (Drover\Jobs\LeaseTakenBack) and the
 * job runs where its lease is held now, without Laravel's failure path.
 *
 * A marker: nothing to implement.
 *
 * - Only writes on that connection are covered. A job writing through another connection (its
 *   models' `$connection`, `DB::connection('other')`), or any other system (mail, an API, a file)
 *   has those effects outside the transaction: for an API, use `once()` of Drover\Jobs\ExactlyOnce
 *   and pass its key as the API's idempotency key. Under drover's embedded database (drover.embedded),
 *   drover's connection holds none of the application's tables, so nothing of the job is covered.
 * - A job that releases itself (`$this->release()`) or is marked failed (`$this->fail()`) is not
 *   completed: its writes commit without a completion, as under Laravel, and the release or the
 *   failure is reported once the transaction has committed.
 * - An exception rolls everything back and goes through Laravel's usual retry / fail path.
 * - A nested `DB::transaction()` in the handler is a savepoint of the worker's transaction; the
 *   handler must not commit or roll back the worker's transaction itself.
 * - Outside a drover worker (the sync driver, another queue, `dispatchSync`, tests) the interface
 *   changes nothing: the handler runs as Laravel runs it.
 */
interface CompletesInTransaction
{
}
