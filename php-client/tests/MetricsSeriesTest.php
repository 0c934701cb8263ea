<?php

namespace Drover\Tests;

use Drover\Dashboard\Range;
use Drover\Dashboard\Repositories\MetricsRepository;
use Illuminate\Database\Capsule\Manager as Capsule;
use PHPUnit\Framework\TestCase;

/**
 * The charts' series against a real PostgreSQL: minutes of two masters merged into each step of
 * a range — counts summed, histograms merged bucket by bucket in the database — for one queue,
 * one class, or everything; minutes outside the range left out.
 */
final class MetricsSeriesTest extends TestCase
{
    public function testMinutesOfEveryMasterAreMergedIntoEachStep(): void
    {
        $pdo = PostgresServer::get()->pdo();
        $pdo->exec('TRUNCATE drover.metrics');
        $dist = fn (int $n, float $upper) => json_encode(['n' => $n, 'sum' => $n * $upper, 'max' => $upper, 'buckets' => [[$upper, $n]]]);
        $insert = $pdo->prepare('INSERT INTO drover.metrics (minute, node, hostname, queue, class, completed, failed, released, runtime, wait, cpu, memory)
            VALUES (date_trunc(\'minute\', now()) - make_interval(mins => ?), ?, \'h\', ?, ?, ?, ?, 0, ?::jsonb, ?::jsonb, \'{}\', \'{}\')');
        // Two masters in the same minute (5 minutes ago), one queue each; one older minute; one
        // minute outside the last hour.
        $insert->execute([5, 1, 'mail', 'App\\Jobs\\A', 10, 1, $dist(10, 8.0), $dist(10, 2.0)]);
        $insert->execute([5, 2, 'mail', 'App\\Jobs\\B', 30, 0, $dist(30, 64.0), $dist(30, 4.0)]);
        $insert->execute([20, 1, 'billing', 'App\\Jobs\\A', 5, 5, $dist(5, 16.0), $dist(5, 1.0)]);
        $insert->execute([120, 1, 'mail', 'App\\Jobs\\A', 99, 0, $dist(99, 1.0), $dist(99, 1.0)]);
        $server = PostgresServer::get();
        $capsule = new Capsule();
        $capsule->addConnection(['driver' => 'pgsql', 'host' => $server->socketDir(), 'database' => 'drover', 'username' => 'drover', 'password' => '', 'charset' => 'utf8', 'prefix' => '', 'schema' => 'public']);
        $metrics = new MetricsRepository($capsule->getConnection());

        $all = $metrics->series(null, null, Range::Hour);
        $this->assertSame([10, 40], [$all[0]['completed'] + $all[0]['failed'], $all[1]['completed']], 'two steps in the hour, oldest first');
        $merged = $all[1];
        $this->assertSame(40, $merged['runtime']->count());
        $this->assertSame(8.0, $merged['runtime']->quantile(0.25), 'a quarter ran within the first master\'s bucket');
        $this->assertSame(64.0, $merged['runtime']->quantile(0.95));
        $this->assertSame(4.0, $merged['wait']->quantile(0.5));

        $mail = $metrics->series('mail', null, Range::Hour);
        $this->assertCount(1, $mail);
        $this->assertSame(40, $mail[0]['completed']);
        $a = $metrics->series(null, 'App\\Jobs\\A', Range::Day);
        $this->assertSame(10 + 5 + 99, array_sum(array_column($a, 'completed')), 'the day holds the older minute too');
        $this->assertCount(3, MetricsRepository::charts($a, Range::Day));
    }
}
