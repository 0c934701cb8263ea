<?php

namespace Drover\Control;

use Illuminate\Database\ConnectionInterface;

/**
 * A fleet restart's requests through the masters' node rows (`drover:restart --fleet`; migration
 * 0009): asking one master to reload (`drover.request_reload`, which it hears on NOTIFY and reads
 * at every reap pass, broker/queries/fleet_reload.sql), and reading how far it got — the request
 * it answered (`reload_done`) and the status it wrote since.
 */
final class FleetRestartRequests
{
    public function __construct(private ConnectionInterface $db)
    {
    }

    /** Asks master $node to reload: the request's number, or null when its row is gone. */
    public function ask(int $node): ?int
    {
        $request = $this->db->selectOne('SELECT drover.request_reload(?) AS r', [$node])->r;
        return $request === null ? null : (int) $request;
    }

    /**
     * Master $node's answer as its row holds it: `reload_done` (the last request it applied),
     * the database's clock `now`, its `status` document (JSON text) and whether that status was
     * written at or after $since (`fresh`; never while $since is null). Null when its row is gone
     * (the master stopped).
     */
    public function answer(int $node, ?string $since): ?object
    {
        return $this->db->selectOne(
            'SELECT reload_done, clock_timestamp()::text AS now, status::text AS status,
                        (status_at IS NOT NULL AND status_at >= ?::timestamptz) AS fresh
                 FROM drover.nodes WHERE id = ?',
            [$since ?? 'infinity', $node],
        );
    }
}
