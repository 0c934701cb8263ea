<?php

namespace Drover\Queue;

use Illuminate\Contracts\Foundation\Application;
use Illuminate\Database\ConnectionInterface;

/**
 * Queues paused by name in `drover.paused_queues`, which every master of the database reads each
 * second (it claims nothing from a paused queue; running jobs finish). Written on Laravel's
 * QueuePaused / QueueResumed (`queue:pause`, `queue:resume`, `Queue::pause()`, `Queue::pauseFor()`)
 * by Listeners\RecordQueuePause, and by `drover:pause --queue` / `drover:continue --queue` on any
 * Laravel. The database, not the cache: masters on other hosts must see it.
 */
final class QueuePauses
{
    public function __construct(private readonly ConnectionInterface $db)
    {
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
        return new self($app['db']->connection(\Drover\Config\Embedded::connectionName($app, $config['connection'] ?? null)));
    }

    /**
     * Pauses $queue until resumed, or for $ttl (seconds, a DateTimeInterface or a DateInterval, as
     * Laravel's pauseFor takes it). A TTL already over resumes it, as the cache forgets such a key.
     */
    public function pause(string $queue, mixed $ttl = null): void
    {
        $seconds = self::seconds($ttl);
        if ($seconds !== null && $seconds <= 0) {
            $this->resume($queue);
            return;
        }
        $this->db->statement(
            'INSERT INTO drover.paused_queues (queue, until) VALUES (?, now() + make_interval(secs => ?::float8))
             ON CONFLICT (queue) DO UPDATE SET paused_at = now(), until = excluded.until',
            [$queue, $seconds],
        );
    }

    public function resume(string $queue): void
    {
        $this->db->statement('DELETE FROM drover.paused_queues WHERE queue = ?', [$queue]);
    }

    /**
     * The queues paused now, each with the seconds its pause has left (null: until resumed).
     *
     * @return array<string, float|null>
     */
    public function paused(): array
    {
        $paused = [];
        foreach ($this->db->select(
            'SELECT queue, extract(epoch FROM until - now())::float8 AS left_secs FROM drover.paused_queues
             WHERE until IS NULL OR until > now() ORDER BY queue'
        ) as $row) {
            $paused[(string) $row->queue] = $row->left_secs === null ? null : (float) $row->left_secs;
        }
        return $paused;
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
            return (float) ($ttl->getTimestamp() - time());
        }
        if (is_int($ttl) || is_float($ttl) || (is_string($ttl) && is_numeric($ttl))) {
            return (float) $ttl;
        }
        throw new \InvalidArgumentException('drover: a queue pause lasts a number of seconds, a DateTimeInterface or a DateInterval, not ' . get_debug_type($ttl));
    }
}
