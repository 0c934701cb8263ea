<?php

// Shared between worker processes (queue:restart, unique jobs, job middleware locks).
return [
    'default' => 'file',
    'stores' => [
        'array' => ['driver' => 'array', 'serialize' => false],
        'file' => ['driver' => 'file', 'path' => storage_path('framework/cache/data')],
    ],
    'prefix' => 'fixture',
];
