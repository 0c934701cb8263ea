<?php

namespace Drover\Dashboard;

use Drover\Config\Embedded;
use Illuminate\Database\ConnectionInterface;
use Illuminate\Support\Facades\DB;

/**
 * The connection the dashboard (and `drover:status --fleet`, `drover:restart --fleet`) reads
 * drover's schema through, and acts through where it acts:
 * drover.dashboard.database, else drover.database — the embedded cluster's on a laptop. With
 * least-privilege roles (docs/postgres-roles.md) it is a login role granted drover_reader for a
 * dashboard that only looks, drover_operator for one that acts.
 */
final class DashboardDatabase
{
    public static function connection(): ConnectionInterface
    {
        $name = config('drover.dashboard.database') ?: (config('drover.database') ?: null);
        return DB::connection(Embedded::connectionName(app(), is_string($name) ? $name : null));
    }
}
