<?php

// The bench app's config/drover.php (target/bench-laravel12-app), written by drover-bench from
// bench/fleet/drover.php: the fixture's own configuration (tests/laravel-app/config/drover.php,
// its path put in below by the harness), unchanged unless BENCH_FLEET is set. Shape 8's outage
// runs set it: the default pool gets DROVER_OUTAGE_GRACE as its `outage_grace`, and a second
// pool `api` of BENCH_API_PROCESSES workers (2) serves the queue `api` alone, prefetch 1, no
// timeout, with the same grace: the long jobs land two per master, whatever the short ones do.
$config = require '__FIXTURE_CONFIG__';
if (getenv('BENCH_FLEET')) {
    $grace = (float) env('DROVER_OUTAGE_GRACE', 0);
    $config['defaults']['default']['outage_grace'] = $grace;
    $config['defaults']['api'] = array_merge($config['defaults']['default'], [
        'queue' => ['api'],
        'processes' => (int) env('BENCH_API_PROCESSES', 2),
        'prefetch' => 1,
        'timeout' => 0,
        'tries' => 3,
    ]);
}
return $config;
