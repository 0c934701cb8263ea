<?php

// Shared between worker processes (queue:restart, unique jobs, job middleware locks).
return [
    'default' => 'file',
    'stores' => [
        'array' => ['driver' => 'array', 'serialize' => false],
        'file' => ['driver' => 'file', 'path' => storage_path('framework/cache/data')],
        // The fork tests' store that holds a database connection (a zygote that used it at boot
        // must not hand that connection to its workers).
        'database' => ['driver' => 'database', 'table' => 'cache', 'connection' => null, 'lock_connection' => null],
    ],
    'prefix' => 'fixture',
];
