<?php

return [
    // pgsql, or sqlite: a new Laravel 12 application's default (the dev loop on drover's embedded
    // PostgreSQL).
    'default' => env('DB_CONNECTION', 'pgsql'),
    'connections' => [
        'sqlite' => [
            'driver' => 'sqlite',
            'database' => env('DB_SQLITE', storage_path('database.sqlite')),
            'prefix' => '',
            'foreign_key_constraints' => true,
        ],
        'pgsql' => [
            'driver' => 'pgsql',
            // A directory is a Unix socket directory (e.g. drover's embedded cluster).
            'host' => env('DB_HOST', '127.0.0.1'),
            'port' => env('DB_PORT', '5432'),
            'database' => env('DB_DATABASE', 'drover'),
            'username' => env('DB_USERNAME', 'drover'),
            'password' => env('DB_PASSWORD', ''),
            'charset' => 'utf8',
            'prefix' => '',
            'prefix_indexes' => true,
            'schema' => 'public',
            // libpq's TLS settings; the drover master takes them from here too.
            'sslmode' => env('DB_SSLMODE', 'prefer'),
            'sslrootcert' => env('DB_SSLROOTCERT'),
            // For the fork test of an application whose connections are persistent, and for an
            // application behind a transaction pooler, whose own prepared statements (Laravel 8's
            // connector prepares `set names`) must be emulated.
            'options' => array_filter([
                PDO::ATTR_PERSISTENT => env('FIXTURE_PERSISTENT_PDO') ? true : null,
                PDO::ATTR_EMULATE_PREPARES => env('FIXTURE_EMULATE_PREPARES') ? true : null,
            ], fn ($v) => $v !== null),
        ],
        // The same database as other roles (tests/roles.rs): the master's own
        // (drover.master_database) and the dashboard's (drover.dashboard.database).
        'master_role' => [
            'driver' => 'pgsql',
            'host' => env('DB_HOST', '127.0.0.1'),
            'port' => env('DB_PORT', '5432'),
            'database' => env('DB_DATABASE', 'drover'),
            'username' => env('FIXTURE_MASTER_DB_USERNAME', 'drover'),
            'password' => '',
            'charset' => 'utf8',
            'prefix' => '',
            'schema' => 'public',
        ],
        'dashboard_role' => [
            'driver' => 'pgsql',
            'host' => env('DB_HOST', '127.0.0.1'),
            'port' => env('DB_PORT', '5432'),
            'database' => env('DB_DATABASE', 'drover'),
            'username' => env('FIXTURE_DASHBOARD_DB_USERNAME', 'drover'),
            'password' => '',
            'charset' => 'utf8',
            'prefix' => '',
            'schema' => 'public',
        ],
        // Where the journal goes when it must outlive the application's database (a failover
        // test: the jobs' records are kept apart from the pair that fails over, as the Rust
        // tests keep `runs`).
        'records' => [
            'driver' => 'pgsql',
            'host' => env('FIXTURE_RECORDS_HOST', '127.0.0.1'),
            'port' => env('FIXTURE_RECORDS_PORT', '5432'),
            'database' => 'drover',
            'username' => 'drover',
            'password' => '',
            'charset' => 'utf8',
            'prefix' => '',
            'schema' => 'public',
        ],
    ],
    // The connection App\Support\Journal writes to (null: the default).
    'fixture_journal' => env('FIXTURE_RECORDS_HOST') ? 'records' : null,
    'migrations' => 'migrations',
    // For the benchmark's queue:work + redis engine (phpredis).
    'redis' => [
        'client' => 'phpredis',
        'default' => [
            'host' => env('REDIS_HOST', '127.0.0.1'),
            'port' => (int) env('REDIS_PORT', 6379),
            'password' => null,
            'database' => 0,
        ],
    ],
];
