<?php

namespace Drover\Dashboard\Actions;

use Illuminate\Database\ConnectionInterface;

/**
 * A pool's size set from the console for one master (`drover.pool_sizes`, migration 0014): the
 * master hears at once (NOTIFY drover_console), scales the pool (src/rules/pool_size.rs), and
 * says how it went in the row's `outcome`; the size holds until the master re-reads its
 * configuration (a reload or a restart), when config/drover.php's holds again.
 */
final class PoolSizes
{
    public function __construct(private ConnectionInterface $db)
    {
    }

    /** Sets $pool of master $node to $processes. @throws \InvalidArgumentException naming what is wrong */
    public function set(int $node, string $pool, mixed $processes, string $by): int
    {
        if (!is_string($processes) || !ctype_digit($processes) || (int) $processes > 1000) {
            throw new \InvalidArgumentException('processes must be a whole number from 0 to 1000, not ' . json_encode($processes));
        }
        if ($pool === '' || mb_strlen($pool) > 200) {
            throw new \InvalidArgumentException('name the pool, as the overview shows it');
        }
        if ($this->db->selectOne('SELECT 1 AS x FROM drover.nodes WHERE id = ?', [$node]) === null) {
            throw new \InvalidArgumentException("no master with node id $node is registered");
        }
        $this->db->insert(
            'INSERT INTO drover.pool_sizes (node, pool, processes, requested_by) VALUES (?, ?, ?, ?)
             ON CONFLICT (node, pool) DO UPDATE SET processes = excluded.processes, requested_by = excluded.requested_by,
                 requested_at = now(), outcome = NULL, applied_at = NULL',
            [$node, $pool, (int) $processes, mb_substr($by, 0, 300)]
        );
        return (int) $processes;
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
