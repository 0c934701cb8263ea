<?php

return [
    'default' => env('LOG_CHANNEL', 'stderr'),
    'channels' => [
        'stderr' => [
            'driver' => 'monolog',
            'handler' => Monolog\Handler\StreamHandler::class,
            'with' => ['stream' => 'php://stderr'],
            'level' => env('LOG_LEVEL', 'error'),
        ],
        'null' => ['driver' => 'monolog', 'handler' => Monolog\Handler\NullHandler::class],
        // A file, for the fork tests (a zygote must not hand its open log file to its workers).
        'single' => [
            'driver' => 'single',
            'path' => storage_path('logs/fixture.log'),
            'level' => env('LOG_LEVEL', 'error'),
        ],
    ],
];
