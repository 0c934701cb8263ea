<?php

namespace Drover\Dashboard\Actions;

use Drover\Dashboard\Repositories\PoolSizeRepository;
use Illuminate\Database\ConnectionInterface;

/**
 * A pool's size set from the console for one master (`drover.pool_sizes`, migration 0014): the
 * master hears at once (NOTIFY drover_console), scales the pool (src/rules/pool_size.rs), and
 * says how it went in the row's `outcome`; the size holds until the master re-reads its
 * configuration (a reload or a restart), when config/drover.php's holds again. What is asked is
 * checked here; the row is written by PoolSizeRepository.
 */
final class PoolSizes
{
    private PoolSizeRepository $sizes;

    public function __construct(ConnectionInterface $db)
    {
        $this->sizes = new PoolSizeRepository($db);
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
        if (!$this->sizes->masterExists($node)) {
            throw new \InvalidArgumentException("no master with node id $node is registered");
        }
        $this->sizes->set($node, $pool, (int) $processes, $by);
        return (int) $processes;
    }
}
