<?php

namespace Drover\Queue;

use Illuminate\Contracts\Foundation\Application;
use Illuminate\Database\ConnectionInterface;

/**
 * Queues paused by name for every master of the database (`drover.paused_queues`): Laravel's
 * `queue:pause`, `queue:resume`, `Queue::pause()` and `Queue::pauseFor()` (through
 * Listeners\RecordQueuePause), and `drover:pause --queue` / `drover:continue --queue` on any
 * Laravel. The database, not the cache: masters on other hosts must see it.
 *
 * A pause holds from the moment pause() returns, as under `queue:work`, where each worker reads
 * the pause before every job it takes: the claim of every master checks the pause in the
 * database, a pause wakes every master at once (NOTIFY), and pause() waits until every master
 * that may still hand out jobs has confirmed that it hands out none of the queue and has told its
 * workers to give back the prefetched jobs of it they have not started (each reads that before
 * it starts another job). Jobs already running finish. The
 * statements are the schema's own functions (broker/migrations/0008_pause_confirmations.sql),
 * which the binary uses too.
 */
final class QueuePauses
{
    /**
     * The longest pause() waits for the masters, in seconds. A master that does not answer is
     * waited for only until it has been silent for two of its leases (a minute with the default
     * lease): by then its workers can start nothing. This bounds anything else.
     */
    public const CONFIRM_TIMEOUT = 120.0;

    /** After this long, pause() says which masters it still waits for (seconds). */
    private const SAY_WAITING_AFTER = 1.0;

    /** The longest pause with a TTL, in seconds (a century), as drover.pause_queue takes it. */
    public const MAX_TTL = 3_153_600_000;

    /**
     * @param ConnectionInterface $db the database of the drover queue connection
     * @param (\Closure(): ConnectionInterface)|null $fresh a new connection to the same
     *        database, for a pause or resume asked inside a transaction of $db: it holds at once,
     *        as Laravel's cache key does, whatever becomes of the transaction
     */
    public function __construct(
        private readonly ConnectionInterface $db,
        private readonly ?\Closure $fresh = null,
        private readonly float $timeout = self::CONFIRM_TIMEOUT,
    ) {
    }

    /**
     * The database connection of a queue connection whose driver is drover, or null for any other
     * driver (its pause is Laravel's business alone).
     */
    public static function forQueueConnection(Application $app, ?string $connection): ?self
    {
        $connection = $connection === null || $connection === '' ? (string) $app['config']['queue.default'] : $connection;
        $config = $app['config']["queue.connections.$connection"] ?? null;
        if (!is_array($config) || ($config['driver'] ?? null) !== 'drover') {
            return null;
        }
        $name = \Drover\Config\Embedded::connectionName($app, $config['connection'] ?? null);
        $fresh = static function () use ($app, $name): ConnectionInterface {
            $name ??= (string) $app['config']['database.default'];
            return $app['db.factory']->make((array) $app['config']["database.connections.$name"], $name);
        };
        return new self($app['db']->connection($name), $fresh);
    }

    /**
     * Pauses $queue until resumed, or for $ttl (seconds, a DateTimeInterface or a DateInterval, as
     * Laravel's pauseFor takes it: whole seconds, as its cache counts them), and returns once it
     * holds on every master. A TTL already over resumes it, as the cache forgets such a key.
     *
     * @param (callable(string): void)|null $waiting told, once a second has gone by, which
     *        masters it still waits for
     * @throws PauseNotConfirmed when a master that answers the database does not confirm it
     *         within the timeout (the pause stays in force)
     */
    public function pause(string $queue, mixed $ttl = null, ?callable $waiting = null): void
    {
        $seconds = self::seconds($ttl);
        $db = $this->outsideTransactions();
        $version = $this->run($db, 'SELECT drover.pause_queue(?, ?::float8) AS version', [$queue, $seconds])[0]->version ?? null;
        if ($version === null) {
            return; // over already: a resume
        }
        $this->awaitConfirmation($db, $queue, $waiting);
    }

    /** Resumes $queue on every master: each claims from it again as soon as it hears. */
    public function resume(string $queue): void
    {
        $this->run($this->outsideTransactions(), 'SELECT drover.resume_queue(?) AS resumed', [$queue]);
    }

    /**
     * The queues paused now, each with the seconds its pause has left (null: until resumed): the
     * master's own read (broker/queries/shared/paused_queues.sql), by the database's clock.
     *
     * @return array<string, float|null>
     */
    public function paused(): array
    {
        $paused = [];
        $read = \Drover\Schema\BrokerQuery::named('paused_queues');
        foreach ($this->run($this->db, $read->sql, $read->bindings([null])) as $row) {
            $paused[(string) $row->queue] = $row->left_secs === null ? null : (float) $row->left_secs;
        }
        return $paused;
    }

    /** $this->db, or a new connection when $this->db is inside a transaction. */
    private function outsideTransactions(): ConnectionInterface
    {
        if ($this->db->transactionLevel() === 0) {
            return $this->db;
        }
        if ($this->fresh === null) {
            // Written in the transaction, the pause would hold only at its commit, and waiting
            // for the masters to confirm a row they cannot see would never end.
            throw new \LogicException('drover: a queue pause or resume inside a database transaction needs a connection of its own: build QueuePauses with one (QueuePauses::forQueueConnection does)');
        }
        return ($this->fresh)();
    }

    /**
     * A statement on the write connection; a schema without the pause functions is named, with
     * the migration that brings them.
     *
     * @param list<mixed> $bindings
     * @return list<object>
     */
    private function run(ConnectionInterface $db, string $sql, array $bindings): array
    {
        try {
            return $db->select($sql, $bindings, false);
        } catch (\Illuminate\Database\QueryException $e) {
            if ((string) $e->getCode() === '42883' || (string) $e->getCode() === '42P01') {
                throw new \RuntimeException('drover: the database has no queue pauses of this drover version (migration 0008_pause_confirmations): run `php artisan migrate`', 0, $e);
            }
            throw $e;
        }
    }

    /** Until every master that may still hand out jobs of $queue has confirmed its pause. */
    private function awaitConfirmation(ConnectionInterface $db, string $queue, ?callable $waiting): void
    {
        $started = hrtime(true);
        $nap = 1_000;
        $said = false;
        while (true) {
            $masters = $this->run($db, 'SELECT node, hostname, pid, silent_secs, lease_secs FROM drover.pause_unconfirmed(?)', [$queue]);
            if ($masters === []) {
                return;
            }
            $waited = (hrtime(true) - $started) / 1e9;
            // Past the timeout, a master that still answers the database (heard from within its
            // lease: it heartbeats every half lease) and has not confirmed is named. One that has
            // gone silent is waited for until it drops out, two leases after its last word.
            $answering = array_values(array_filter($masters, static fn (object $m) => (float) $m->silent_secs < (float) $m->lease_secs));
            if ($waited >= $this->timeout && $answering !== []) {
                throw PauseNotConfirmed::by($queue, $answering, $waited);
            }
            if ($waiting !== null && !$said && $waited >= self::SAY_WAITING_AFTER) {
                $waiting('drover: waiting for ' . PauseNotConfirmed::describe($masters) . " to confirm the pause of queue $queue (a master that does not answer is waited for until it has been silent for two of its leases)");
                $said = true;
            }
            // Every millisecond at first (the masters confirm within a few), then less often.
            usleep($nap);
            if ($waited >= 0.1) {
                $nap = min($nap * 2, 50_000);
            }
        }
    }

    /** Seconds from now, or null for no TTL. */
    private static function seconds(mixed $ttl): ?float
    {
        if ($ttl === null) {
            return null;
        }
        if ($ttl instanceof \DateInterval) {
            $ttl = (new \DateTimeImmutable())->add($ttl);
        }
        if ($ttl instanceof \DateTimeInterface) {
            $ttl = $ttl->getTimestamp() - time();
        }
        if (is_int($ttl) || is_float($ttl) || (is_string($ttl) && is_numeric($ttl))) {
            $seconds = (float) $ttl;
            if (is_finite($seconds) && $seconds <= self::MAX_TTL) {
                // Whole seconds, as Laravel's cache keeps its key (a TTL under one: forgotten).
                return (float) max(0, (int) $seconds);
            }
        }
        throw new \InvalidArgumentException('drover: a queue pause lasts a number of seconds up to a century, a DateTimeInterface or a DateInterval (or until resumed: no TTL), not ' . (is_scalar($ttl) ? var_export($ttl, true) : get_debug_type($ttl)));
    }
}
