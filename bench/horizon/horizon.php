<?php

// The bench's Horizon (drover-bench's `horizon` engine): one supervisor on the redis connection's
// default queue, `balance=simple`, as many processes as the shape's workers, and the options the
// queue:work engines get in the same shape (tries 1, timeout 0, the shape's sleep). Everything else
// is Horizon 5.29.1's own default (its config/horizon.php).
return [
    'domain' => null,
    'path' => 'horizon',
    'use' => 'default',
    'prefix' => 'bench_horizon:',
    'middleware' => ['web'],
    'waits' => ['redis:default' => 60],
    'trim' => [
        'recent' => 60,
        'pending' => 60,
        'completed' => 60,
        'recent_failed' => 10080,
        'failed' => 10080,
        'monitored' => 10080,
    ],
    'silenced' => [],
    'metrics' => ['trim_snapshots' => ['job' => 24, 'queue' => 24]],
    'fast_termination' => false,
    'memory_limit' => 64,
    'defaults' => [],
    'environments' => [
        env('APP_ENV', 'production') => [
            'supervisor-1' => [
                'connection' => 'redis',
                'queue' => ['default'],
                'balance' => 'simple',
                'processes' => (int) env('BENCH_HORIZON_PROCESSES', 4),
                'tries' => 1,
                'timeout' => 0,
                'sleep' => (int) env('BENCH_HORIZON_SLEEP', 3),
                'memory' => 128,
                'maxTime' => 0,
                'maxJobs' => 0,
                'nice' => 0,
            ],
        ],
    ],
];
