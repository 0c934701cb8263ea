<?php
// Dispatches COUNT demo jobs one at a time, each its own INSERT and commit, the way web requests
// enqueue. Prints the epoch time of the first dispatch.
//   php demo/produce.php DSN COUNT MS
require __DIR__ . '/../php-client/autoload.php';

[, $dsn, $count, $ms] = $argv + [null, null, 4000, 10];
$pdo = new PDO($dsn);
$pdo->setAttribute(PDO::ATTR_ERRMODE, PDO::ERRMODE_EXCEPTION);
$producer = new Drover\Producer($pdo);
$first = microtime(true);
for ($i = 1; $i <= (int) $count; $i++) {
    $producer->enqueue(json_encode(['seq' => $i, 'ms' => (int) $ms]), 'default', 0, 3);
}
printf("%.6f\n", $first);
