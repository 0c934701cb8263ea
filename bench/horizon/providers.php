<?php

// The bench app's providers: the fixture's own (tests/laravel12-app/bootstrap/providers.php, copied
// beside this file as providers.fixture.php), and Horizon's only for the `horizon` engine
// (BENCH_HORIZON=1). Registered, Horizon replaces the redis queue connector with its own, which
// records every pushed job in Redis: queue:work redis is measured without it, as an application
// without Horizon runs it.
$providers = require __DIR__ . '/providers.fixture.php';
if (getenv('BENCH_HORIZON')) {
    $providers[] = Laravel\Horizon\HorizonServiceProvider::class;
}
return $providers;
