<?php

namespace Drover\Dashboard\Repositories;

use Drover\Dashboard\Limits;
use Drover\Schema\BrokerQuery;
use Illuminate\Database\ConnectionInterface;

/**
 * What the dashboard reads of limits (docs/limits.md): the keys jobs wait for, most waited for
 * first — the master's own read (broker/queries/shared/limit_keys.sql, Drover\Schema\BrokerQuery),
 * bounded by the first 100,000 waiting jobs and Limits::PAGE keys.
 */
final class LimitRepository
{
    public function __construct(private ConnectionInterface $db)
    {
    }

    /**
     * @return list<object> key, waiting, held, rate_used (null: no window open),
     *         window_ends_in_secs, oldest_wait_secs (null: none due)
     */
    public function keys(): array
    {
        $read = BrokerQuery::named('limit_keys');
        return $this->db->select($read->sql, $read->bindings([Limits::PAGE, null]));
    }
}
