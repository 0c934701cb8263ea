<?php

namespace Drover\Dashboard\Repositories;

use Illuminate\Database\ConnectionInterface;

/**
 * The pool sizes set from the console (`drover.pool_sizes`, migration 0014), one row per master
 * and pool: written here (Dashboard\Actions\PoolSizes checks what is asked first), read by the
 * overview and by the master, which scales the pool and fills in the row's `outcome`
 * (broker/queries/pool_sizes.sql).
 */
final class PoolSizeRepository
{
    public function __construct(private ConnectionInterface $db)
    {
    }

    /** Whether master $node has a row in drover.nodes. */
    public function masterExists(int $node): bool
    {
        return $this->db->selectOne('SELECT 1 AS x FROM drover.nodes WHERE id = ?', [$node]) !== null;
    }

    /**
     * Sets $pool of master $node to $processes, asked by $by: a new request, which the master has
     * neither applied nor answered yet.
     */
    public function set(int $node, string $pool, int $processes, string $by): void
    {
        $this->db->insert(
            'INSERT INTO drover.pool_sizes (node, pool, processes, requested_by) VALUES (?, ?, ?, ?)
             ON CONFLICT (node, pool) DO UPDATE SET processes = excluded.processes, requested_by = excluded.requested_by,
                 requested_at = now(), outcome = NULL, applied_at = NULL',
            [$node, $pool, $processes, mb_substr($by, 0, 300)]
        );
    }

    /**
     * Every size set, by master and pool.
     *
     * @return array<int, array<string, object>>
     */
    public function all(): array
    {
        $sizes = [];
        foreach ($this->db->select('SELECT node, pool, processes, requested_by, outcome FROM drover.pool_sizes') as $row) {
            $sizes[(int) $row->node][(string) $row->pool] = $row;
        }
        return $sizes;
    }
}
