<?php

// Blade, for the dashboard (the Laravel 8 fixture has no views of its own).
return [
    'paths' => [],
    'compiled' => storage_path('framework/views'),
];
