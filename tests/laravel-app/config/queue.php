<?php

return [
    'default' => env('QUEUE_CONNECTION', 'drover'),
    'connections' => [
        'sync' => ['driver' => 'sync'],
        // Laravel's database driver, for the side-by-side (differential) runs.
        'database' => [
            'driver' => 'database',
            'connection' => env('DB_CONNECTION', 'pgsql'),
            'table' => 'jobs',
            'queue' => 'default',
            'retry_after' => (int) env('QUEUE_RETRY_AFTER', 90),
            'after_commit' => false,
        ],
        // Laravel's redis driver (what Horizon runs on), for the benchmark.
        'redis' => [
            'driver' => 'redis',
            'connection' => 'default',
            'queue' => 'default',
            'retry_after' => 90,
            'block_for' => null,
            'after_commit' => false,
        ],
        'drover' => [
            'driver' => 'drover',
            'connection' => env('DB_CONNECTION', 'pgsql'),
            'queue' => 'default',
            'after_commit' => (bool) env('QUEUE_AFTER_COMMIT', false),
            'lose_dispatches_on_database_crash' => (bool) env('DROVER_LOSE_DISPATCHES_ON_CRASH', false),
        ],
        // Laravel 12's failover driver (absent from 8: there this connection is never used): drover
        // first, redis when drover's database cannot take the job (tests/failover.rs).
        'failover' => [
            'driver' => 'failover',
            'connections' => ['drover', 'redis'],
        ],
    ],
    'batching' => [
        'database' => env('DB_CONNECTION', 'pgsql'),
        'table' => 'job_batches',
    ],
    'failed' => [
        'driver' => 'database-uuids',
        'database' => env('DB_CONNECTION', 'pgsql'),
        'table' => 'failed_jobs',
    ],
];
