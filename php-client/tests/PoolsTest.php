<?php

namespace Drover\Tests;

use Drover\Config\Exporter;
use Drover\Config\InvalidConfig;
use Drover\Config\Pools;
use PHPUnit\Framework\TestCase;

final class PoolsTest extends TestCase
{
    private function config(array $overrides = []): array
    {
        return array_replace_recursive([
            'state_dir' => '/srv/app/storage/drover',
            'defaults' => ['default' => ['queue' => 'high, default', 'processes' => 2, 'backoff' => [1, 5]]],
            'environments' => ['production' => ['default' => ['processes' => 8], 'mail' => ['queue' => ['mail']]]],
        ], $overrides);
    }

    public function testEnvironmentOverridesMergeOverDefaults(): void
    {
        $local = Pools::resolve($this->config(), 'local');
        $this->assertSame(['default'], array_keys($local));
        $this->assertSame(2, $local['default']['processes']);
        $this->assertSame(['high', 'default'], $local['default']['queue']);
        $this->assertSame([1, 5], $local['default']['backoff']);
        $this->assertSame(60, $local['default']['timeout'], 'unset keys take the documented defaults');

        $production = Pools::resolve($this->config(), 'production');
        $this->assertSame(['default', 'mail'], array_keys($production));
        $this->assertSame(8, $production['default']['processes']);
        $this->assertSame(1, $production['mail']['processes']);
    }

    public function testEveryUnknownKeyIsNamedAtOnce(): void
    {
        try {
            Pools::resolve($this->config(['supervisors' => [], 'defaults' => ['default' => ['proceses' => 3, 'processes' => 0]]]), 'local');
            $this->fail('expected InvalidConfig');
        } catch (InvalidConfig $e) {
            $this->assertCount(3, $e->problems, $e->getMessage());
            $this->assertStringContainsString('unknown key drover.supervisors', $e->getMessage());
            $this->assertStringContainsString('pool default: unknown key proceses', $e->getMessage());
            $this->assertStringContainsString('processes must be an integer of at least 1', $e->getMessage());
        }
    }

    public function testTheContractHasOnePoolPerNameWithItsWorkerCommand(): void
    {
        $contract = Exporter::contract($this->config(), 'production', '/usr/bin/php', '/srv/app/artisan', '/srv/app');
        $this->assertSame(1, $contract['version']);
        $this->assertSame('/srv/app/storage/drover', $contract['state_dir']);
        $this->assertSame(['name', 'queues', 'processes', 'prefetch', 'timeout', 'command', 'cwd', 'memory', 'nice', 'boot_timeout', 'balance', 'min_processes', 'max_processes', 'balance_max_shift', 'balance_cooldown', 'autoscaling_strategy', 'scale_down_delay'], array_keys($contract['pools'][0]));
        $this->assertSame(128, $contract['pools'][0]['memory'], "Laravel's memory option is also the master's PSS limit");
        $this->assertSame(['/usr/bin/php', '/srv/app/artisan', 'drover', '--export'], $contract['reload_command']);
        $this->assertSame(['/usr/bin/php', '/srv/app/artisan', 'drover:work', '--pool=mail'], $contract['pools'][1]['command']);
    }

    public function testDatabaseUrlsQuoteValuesAndRefuseOtherDrivers(): void
    {
        $url = Exporter::databaseUrl('pgsql', ['driver' => 'pgsql', 'host' => 'db', 'port' => 5433, 'database' => 'app', 'username' => 'u', 'password' => "it's secret"]);
        $this->assertSame("host='db' port='5433' dbname='app' user='u' password='it\\'s secret'", $url);
        $this->expectExceptionMessage('drover needs PostgreSQL');
        Exporter::databaseUrl('mysql', ['driver' => 'mysql']);
    }
}
