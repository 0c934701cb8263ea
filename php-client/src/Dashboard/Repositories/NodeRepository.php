<?php

namespace Drover\Dashboard\Repositories;

use Illuminate\Database\ConnectionInterface;

/**
 * The masters, from their rows in drover.nodes: hostname, PID, start, heartbeat and the status
 * document each publishes (docs/status.schema.json).
 */
final class NodeRepository
{
    /**
     * A master not heard from for this many of its leases is silent: its heartbeat (every half
     * lease) stopped — it is cut off from the database, frozen or gone — and the status in its
     * row is as of then, whatever it says.
     */
    public const SILENT_LEASES = 2;

    public function __construct(private ConnectionInterface $db)
    {
    }

    /**
     * @return list<object> each master: hostname, pid, started_at, heartbeat_at, status (decoded),
     *     release (null: drover 0.1), silent_secs and lease_secs by the database's clock, and
     *     silent (not heard from for SILENT_LEASES leases)
     */
    public function nodes(): array
    {
        $rows = $this->db->select('SELECT id, hostname, pid, started_at, heartbeat_at, status::text AS status, status_at,
                release, extract(epoch FROM now() - heartbeat_at)::float8 AS silent_secs, lease_secs
            FROM drover.nodes ORDER BY hostname, id');
        foreach ($rows as $row) {
            $row->status = $row->status === null ? null : json_decode($row->status, true);
            $row->silent = (float) $row->silent_secs > self::SILENT_LEASES * (float) $row->lease_secs;
        }
        return $rows;
    }

    /** One master's hostname, pid and release (null: drover 0.1), or null when it has no row. */
    public function find(int $id): ?object
    {
        return $this->db->selectOne('SELECT hostname, pid, release FROM drover.nodes WHERE id = ?', [$id]);
    }

    /**
     * Asks master $id to reload as `drover:restart` does on its host (`drover.request_reload`,
     * which it hears at once and at every reap pass): it re-reads its configuration and replaces
     * its workers one by one.
     */
    public function requestReload(int $id): void
    {
        $this->db->select('SELECT drover.request_reload(?)', [$id]);
    }
}
