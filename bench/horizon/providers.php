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
// Shape 8's job (bench/fleet/FleetJob.php, copied beside this file by the harness).
spl_autoload_register(function (string $class): void {
    if ($class === 'Bench\\FleetJob' && is_file(__DIR__ . '/FleetJob.php')) {
        require __DIR__ . '/FleetJob.php';
    }
});
return $providers;
