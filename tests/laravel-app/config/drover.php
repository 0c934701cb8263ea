<?php

// The fixture's drover configuration (the package's config/drover.php documents every key).
return [
    'binary' => env('DROVER_BINARY'),
    'database' => env('DB_CONNECTION', 'pgsql'),
    'embedded' => env('DROVER_EMBEDDED', 'auto'),
    'state_dir' => env('DROVER_STATE_DIR', storage_path('drover')),
    'lease' => (float) env('DROVER_LEASE', 30),
    'shutdown_grace' => 30,
    'poll_interval' => 5,
    'waits' => ['drover:default' => (int) env('DROVER_WAIT_THRESHOLD', 0)],
    // DROVER_BUDGETS: fleet-wide budgets as `queue=jobs,queue=jobs`.
    'budgets' => (static function (): array {
        $budgets = [];
        foreach (array_filter(explode(',', (string) env('DROVER_BUDGETS', ''))) as $pair) {
            [$queue, $jobs] = explode('=', $pair, 2);
            $budgets["drover:$queue"] = (int) $jobs;
        }
        return $budgets;
    })(),
    // tests/limits.rs: the `tenants` queue takes its tenants in turn (DROVER_FAIR: another list,
    // for bench/src/limits.rs).
    'fair' => array_values(array_filter(explode(',', (string) env('DROVER_FAIR', 'drover:tenants')))),
    'metrics' => [
        'record' => (bool) env('DROVER_RECORD_METRICS', true),
        'history' => (int) env('DROVER_HISTORY_MINUTES', 0),
        'listen' => env('DROVER_METRICS_LISTEN'),
    ],
    'defaults' => [
        'default' => [
            'queue' => explode(',', env('DROVER_QUEUES', 'high,default')),
            'processes' => (int) env('DROVER_PROCESSES', 4),
            'prefetch' => (int) env('DROVER_PREFETCH_JOBS', 1),
            'tries' => 1,
            'timeout' => 60,
            'backoff' => 0,
            'force' => (bool) env('DROVER_FORCE', false),
            'max_jobs' => (int) env('DROVER_MAX_JOBS', 0),
            'spawn' => env('DROVER_SPAWN', 'fork'),
            'nice' => (int) env('DROVER_NICE', 0),
        ],
    ],
    // Every environment the tests use (local, testing, ...) runs the pools above: with Horizon's
    // rules an environment that no entry matches would run no workers (DROVER_FIXTURE_ENTRY
    // names another entry, for the test of just that).
    'environments' => [
        env('DROVER_FIXTURE_ENTRY', '*') => [],
    ],
];
