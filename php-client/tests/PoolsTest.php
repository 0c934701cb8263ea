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
            'environments' => ['production' => ['default' => ['processes' => 8], 'mail' => ['queue' => ['mail']]], 'local' => []],
        ], $overrides);
    }

    public function testTheMatchedEntrysOptionsMergeOverTheDefaults(): void
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

    public function testAQueueListedTwiceIsServedOnceWhereItFirstAppears(): void
    {
        // The master refuses a list that names a queue twice; a comma list with a repeat is taken
        // as its first mention.
        $local = Pools::resolve($this->config(['defaults' => ['default' => ['queue' => 'high, default, high']]]), 'local');
        $this->assertSame(['high', 'default'], $local['default']['queue']);
        $listed = Pools::resolve($this->config(['environments' => ['local' => ['mail' => ['queue' => ['mail', 'mail']]]]]), 'local');
        $this->assertSame(['mail'], $listed['mail']['queue']);
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
            $this->assertStringContainsString('processes must be a whole number from 1 to 4096, got 0', $e->getMessage());
        }
    }

    public function testTheContractHasOnePoolPerNameWithItsWorkerCommand(): void
    {
        $contract = Exporter::contract($this->config(), 'production', '/usr/bin/php', '/srv/app/artisan', '/srv/app');
        $this->assertSame(1, $contract['version']);
        $this->assertSame('/srv/app/storage/drover', $contract['state_dir']);
        $this->assertSame(['name', 'queues', 'processes', 'prefetch', 'timeout', 'command', 'spawn', 'zygote_command', 'cwd', 'memory', 'nice', 'boot_timeout', 'balance', 'min_processes', 'max_processes', 'balance_max_shift', 'balance_cooldown', 'autoscaling_strategy', 'scale_down_delay'], array_keys($contract['pools'][0]));
        $this->assertSame('fork', $contract['pools'][0]['spawn'], 'workers are forked from a zygote by default');
        $this->assertSame(['/usr/bin/php', '-d', 'opcache.enable_cli=1', '/srv/app/artisan', 'drover:work', '--pool=mail'], $contract['pools'][1]['zygote_command'], 'the zygote is the worker command with OPcache on for it');
        $this->assertSame(128, $contract['pools'][0]['memory'], "Laravel's memory option is also the master's PSS limit");
        $this->assertSame(['/usr/bin/php', '/srv/app/artisan', 'drover', '--export'], $contract['reload_command']);
        $this->assertSame(['/usr/bin/php', '/srv/app/artisan', 'drover:work', '--pool=mail'], $contract['pools'][1]['command']);
    }

    public function testAnOutageGraceReachesTheContractOnlyWhenSet(): void
    {
        // Left out when 0 (the default): a binary of the previous release, which has no such
        // option, reads the contract of a package that does not use it.
        $none = Exporter::contract($this->config(), 'production', '/usr/bin/php', '/srv/app/artisan', '/srv/app');
        $this->assertArrayNotHasKey('outage_grace', $none['pools'][0]);
        $set = Exporter::contract($this->config(['environments' => ['production' => ['default' => ['outage_grace' => 90]]]]), 'production', '/usr/bin/php', '/srv/app/artisan', '/srv/app');
        $this->assertSame(90.0, $set['pools'][0]['outage_grace']);
        $this->assertArrayNotHasKey('outage_grace', $set['pools'][1]);
        try {
            Pools::resolve($this->config(['defaults' => ['default' => ['outage_grace' => -5]]]), 'local');
            $this->fail('expected InvalidConfig');
        } catch (InvalidConfig $e) {
            $this->assertStringContainsString('outage_grace must be', $e->getMessage());
        }
    }

    public function testBudgetsReachTheContractOnlyWhenSetAndOnlyForDroverConnections(): void
    {
        $none = Exporter::contract($this->config(), 'production', '/usr/bin/php', '/srv/app/artisan', '/srv/app');
        $this->assertArrayNotHasKey('queue_budgets', $none);
        $set = Exporter::contract($this->config([
            'budgets' => ['drover:api' => 10, 'mail' => '3', 'redis:api' => 2],
        ]), 'production', '/usr/bin/php', '/srv/app/artisan', '/srv/app');
        // redis:api (left from Horizon) is not drover's.
        $this->assertSame(['api' => 10, 'mail' => 3], $set['queue_budgets']);
        // Two keys for one queue: the smaller budget.
        $this->assertSame(['api' => 4], Exporter::budgets(['drover:api' => 10, 'second:api' => 4], ['drover', 'second']));
        foreach ([0, -1, 'ten', 1.5, 1000001] as $bad) {
            try {
                Pools::resolve($this->config(['budgets' => ['drover:api' => $bad]]), 'production');
                $this->fail('expected InvalidConfig for ' . var_export($bad, true));
            } catch (InvalidConfig $e) {
                $this->assertStringContainsString('drover.budgets.drover:api must be a whole number of jobs from 1 to 1000000', $e->getMessage());
            }
        }
    }

    public function testSpawnIsForkOrExecAndNamedOtherwise(): void
    {
        $pools = Pools::resolve($this->config(['defaults' => ['default' => ['spawn' => 'exec']]]), 'local');
        $this->assertSame('exec', $pools['default']['spawn']);
        try {
            Pools::resolve($this->config(['defaults' => ['default' => ['spawn' => 'clone']]]), 'local');
            $this->fail('expected InvalidConfig');
        } catch (InvalidConfig $e) {
            $this->assertStringContainsString('pool default: spawn must be fork', $e->getMessage());
        }
    }

    public function testWaitsMetricsAndTheirCommandReachTheContract(): void
    {
        $contract = Exporter::contract($this->config([
            'waits' => ['drover:default' => 60, 'drover:emails' => '30', 'bare' => 0, 'redis:emails' => 5, 'drover:default_again' => 0, 'other:x' => 9],
            'long_wait_cooldown' => 120,
            'metrics' => ['record' => false, 'trim' => 60, 'history' => 30, 'listen' => '127.0.0.1:9187'],
        ]), 'production', '/usr/bin/php', '/srv/app/artisan', '/srv/app');
        // Only keys on drover connections; redis:emails (from Horizon) does not set drover's emails.
        $this->assertSame(['default' => 60, 'emails' => 30, 'bare' => 0, 'default_again' => 0], $contract['long_waits']['thresholds']);
        // Two keys for one queue: the smallest threshold above 0.
        $both = ['drover', 'second'];
        $this->assertSame(['default' => 20], Exporter::waits(['drover:default' => 60, 'second:default' => 20], $both));
        $this->assertSame(['default' => 20], Exporter::waits(['drover:default' => 0, 'second:default' => 20], $both));
        $this->assertSame(['default' => 60], Exporter::waits(['drover:default' => 60, 'second:default' => 0], $both));
        $this->assertSame(120.0, $contract['long_waits']['cooldown']);
        $this->assertSame(['/usr/bin/php', '/srv/app/artisan', 'drover:long-wait'], $contract['long_waits']['command']);
        $this->assertSame([false, 60, 30, '127.0.0.1:9187'], [$contract['record_metrics'], $contract['metrics_trim'], $contract['history_minutes'], $contract['metrics_listen']]);
        // No waits: an empty JSON object, which the master reads as none.
        $none = Exporter::contract($this->config(), 'production', '/usr/bin/php', '/srv/app/artisan', '/srv/app');
        $this->assertSame('{}', json_encode($none['long_waits']['thresholds']));
        // Settings config/drover.php leaves out are left to the master's defaults (recording on,
        // no history), not written again here.
        foreach (['record_metrics', 'metrics_trim', 'history_minutes', 'lease', 'poll_interval', 'shutdown_grace'] as $key) {
            $this->assertArrayNotHasKey($key, $none, $key);
        }
        $this->assertArrayNotHasKey('cooldown', $none['long_waits']);
    }

    public function testTheMetricsTokenIsWrittenOnlyWhenSet(): void
    {
        // Set: the contract carries it (a binary of this release reads it).
        $contract = Exporter::contract($this->config(['metrics' => ['listen' => '9187', 'token' => 'f00dcafe0123456789abcdef']]), 'production', '/usr/bin/php', '/srv/app/artisan', '/srv/app');
        $this->assertSame('f00dcafe0123456789abcdef', $contract['metrics_token']);
        $this->assertSame('9187', $contract['metrics_listen']);
        Pools::resolve($this->config(['metrics' => ['token' => 'f00dcafe0123456789abcdef']]), 'local');
        // Unset, or env() of an unset or empty variable: no key, so the previous release's binary
        // (which refuses unknown keys) still reads the contract.
        foreach ([[], ['token' => null], ['token' => '']] as $metrics) {
            $contract = Exporter::contract($this->config(['metrics' => $metrics]), 'production', '/usr/bin/php', '/srv/app/artisan', '/srv/app');
            $this->assertArrayNotHasKey('metrics_token', $contract, json_encode($metrics));
        }
    }

    public function testBadWaitsAndMetricsKeysAreNamed(): void
    {
        try {
            Pools::resolve($this->config(['waits' => ['drover:default' => 'soon'], 'metrics' => ['recrod' => true]]), 'local');
            $this->fail('expected InvalidConfig');
        } catch (InvalidConfig $e) {
            $this->assertStringContainsString('drover.waits.drover:default must be a whole number of seconds', $e->getMessage());
            $this->assertStringContainsString('unknown key drover.metrics.recrod', $e->getMessage());
        }
    }

    public function testBadGroupsAndDedupWindowAreNamed(): void
    {
        try {
            Pools::resolve($this->config(['groups' => ['hold' => 'payments', 'holds' => []], 'dedup_window' => 0]), 'local');
            $this->fail('expected InvalidConfig');
        } catch (InvalidConfig $e) {
            $this->assertStringContainsString("drover.groups.hold must be a list of queue names, got 'payments'", $e->getMessage());
            $this->assertStringContainsString('unknown key drover.groups.holds (known: hold)', $e->getMessage());
            $this->assertStringContainsString('drover.dedup_window must be a whole number of seconds from 1 to 86400, got 0', $e->getMessage());
        }
        $this->assertNull(Pools::dedupWindowProblem('300'));
        $this->assertNotNull(Pools::dedupWindowProblem(86401));
    }

    public function testBadTracesKeysAreNamed(): void
    {
        try {
            Pools::resolve($this->config(['traces' => ['propagate' => 'sometimes', 'propagates' => true]]), 'local');
            $this->fail('expected InvalidConfig');
        } catch (InvalidConfig $e) {
            $this->assertStringContainsString("drover.traces.propagate must be true or false, got 'sometimes'", $e->getMessage());
            $this->assertStringContainsString('unknown key drover.traces.propagates (known: endpoint, service_name, propagate)', $e->getMessage());
        }
        foreach ([true, false, 'true', 'false', '0', '1'] as $propagate) {
            $this->assertNull(Pools::tracePropagationProblem($propagate), var_export($propagate, true));
            Pools::resolve($this->config(['traces' => ['propagate' => $propagate]]), 'local');
        }
        foreach (['https://collector:4318', 'collector:4318', 'http://', 42] as $endpoint) {
            try {
                Pools::resolve($this->config(['traces' => ['endpoint' => $endpoint]]), 'local');
                $this->fail('expected InvalidConfig for ' . var_export($endpoint, true));
            } catch (InvalidConfig $e) {
                $this->assertStringContainsString('drover.traces.endpoint must be the collector\'s OTLP/HTTP base URL, http://HOST:PORT', $e->getMessage());
            }
        }
        foreach ([null, '', 'http://127.0.0.1:4318', 'http://collector/otlp'] as $endpoint) {
            Pools::resolve($this->config(['traces' => ['endpoint' => $endpoint]]), 'local');
        }
    }

    public function testTracesAreExportedOnlyWhenAnEndpointIsSet(): void
    {
        $contract = fn (array $traces) => Exporter::contract(['state_dir' => '/srv/app/storage/drover', 'traces' => $traces], 'production', '/usr/bin/php', '/srv/app/artisan', '/srv/app');
        $this->assertArrayNotHasKey('traces', $contract(['endpoint' => null, 'propagate' => true]));
        $this->assertArrayNotHasKey('traces', $contract([]));
        $this->assertSame(
            ['endpoint' => 'http://127.0.0.1:4318', 'service_name' => 'shop'],
            $contract(['endpoint' => 'http://127.0.0.1:4318', 'service_name' => 'shop'])['traces'],
        );
        $this->assertSame('drover', $contract(['endpoint' => 'http://c:4318'])['traces']['service_name']);
    }

    public function testDatabaseUrlsQuoteValuesAndRefuseOtherDrivers(): void
    {
        $url = Exporter::databaseUrl('pgsql', ['driver' => 'pgsql', 'host' => 'db', 'port' => 5433, 'database' => 'app', 'username' => 'u', 'password' => "it's secret"]);
        $this->assertSame("host='db' port='5433' dbname='app' user='u' password='it\\'s secret'", $url);
        $this->expectExceptionMessage('drover needs PostgreSQL');
        Exporter::databaseUrl('mysql', ['driver' => 'mysql']);
    }

    public function testEntryKeysArePatternsMatchedLikeStrIs(): void
    {
        $cases = [
            ['production', 'production', true],
            ['production', 'production-eu', false],
            ['production*', 'production', true],
            ['production*', 'production-eu', true],
            ['production*', 'staging', false],
            ['*-eu', 'production-eu', true],
            ['prod*-eu', 'production-eu', true],
            ['prod*-eu', 'production-us', false],
            ['*', 'anything', true],
            ['*', '', true],
            ['prod.eu', 'prodXeu', false],
            ['prod.eu', 'prod.eu', true],
            ['Production', 'production', false],
            ['local', 'local2', false],
        ];
        foreach ($cases as [$pattern, $environment, $expected]) {
            $this->assertSame($expected, Pools::matches($pattern, $environment), "'$pattern' against '$environment'");
            $this->assertSame(\Illuminate\Support\Str::is($pattern, $environment), Pools::matches($pattern, $environment), "as Str::is: '$pattern' against '$environment'");
        }
    }

    public function testTheFirstMatchingEntryInTheOrderWrittenWins(): void
    {
        $config = ['defaults' => [], 'environments' => [
            'production-eu' => ['eu' => []],
            'production*' => ['prod' => []],
            '*' => ['any' => []],
        ]];
        $this->assertSame('production-eu', Pools::matchedEnvironment($config, 'production-eu'));
        $this->assertSame(['eu'], array_keys(Pools::resolve($config, 'production-eu')));
        $this->assertSame('production*', Pools::matchedEnvironment($config, 'production-us'));
        $this->assertSame(['prod'], array_keys(Pools::resolve($config, 'production-us')));
        $this->assertSame('*', Pools::matchedEnvironment($config, 'staging'));
        $this->assertSame(['any'], array_keys(Pools::resolve($config, 'staging')));

        // A catch-all written first shadows everything after it, as in Horizon.
        $config['environments'] = ['*' => ['any' => []]] + $config['environments'];
        $this->assertSame('*', Pools::matchedEnvironment($config, 'production-eu'));
        $this->assertSame(['any'], array_keys(Pools::resolve($config, 'production-eu')));
    }

    public function testDefaultsApplyToEveryPoolOfTheMatchedEntry(): void
    {
        $config = [
            'defaults' => [
                'default' => ['queue' => ['high', 'default'], 'processes' => 2, 'timeout' => 90],
                'reports' => ['queue' => 'reports', 'memory' => 512],
            ],
            'environments' => ['production*' => [
                'default' => ['processes' => 8, 'queue' => ['mail']],
                'imports' => ['queue' => 'imports', 'balance' => 'auto', 'max_processes' => 4],
            ]],
        ];
        $pools = Pools::resolve($config, 'production-eu');
        $this->assertSame(['default', 'reports', 'imports'], array_keys($pools), "the defaults' pools run even where the entry does not name them; the entry's own pools follow");
        $this->assertSame(8, $pools['default']['processes'], "the entry's value wins");
        $this->assertSame(90, $pools['default']['timeout'], "the defaults' value where the entry has none");
        $this->assertSame(['mail'], $pools['default']['queue'], 'a list is replaced whole, not merged index by index');
        $this->assertSame(512, $pools['reports']['memory']);
        $this->assertSame(['imports'], $pools['imports']['queue']);
        $this->assertSame(Pools::POOL_DEFAULTS['timeout'], $pools['imports']['timeout'], 'a pool only the entry has gets the documented defaults');
        $this->assertSame(4, $pools['imports']['max_processes']);
    }

    public function testAnEnvironmentNoEntryMatchesRunsNoPools(): void
    {
        $config = $this->config();
        $this->assertNull(Pools::matchedEnvironment($config, 'staging'));
        $this->assertSame([], Pools::resolve($config, 'staging'), 'no entry: nothing runs, and that is not an error');
        $this->assertSame([], Pools::resolve(['defaults' => ['default' => []], 'environments' => []], 'local'));
        $this->assertSame([], Pools::resolve(['defaults' => ['default' => []]], 'local'));

        // Unknown top-level keys are still refused: they are wrong in every environment.
        $this->expectExceptionMessage('unknown key drover.supervisors');
        Pools::resolve($this->config(['supervisors' => []]), 'staging');
    }

    public function testAMatchedEntryWithoutPoolsRunsNone(): void
    {
        // Horizon's way to keep one environment idle under a catch-all: an empty entry before it.
        $config = ['defaults' => [], 'environments' => ['testing' => [], '*' => ['default' => []]]];
        $this->assertSame('testing', Pools::matchedEnvironment($config, 'testing'));
        $this->assertSame([], Pools::resolve($config, 'testing'));
        $this->assertSame(['default'], array_keys(Pools::resolve($config, 'local')));
    }

    public function testEntryResolvesOneNamedEntry(): void
    {
        $config = ['defaults' => ['default' => []], 'environments' => ['*' => [], 'production' => ['default' => ['processes' => 3]]]];
        $this->assertSame(3, Pools::entry($config, 'production')['default']['processes'], 'even when an earlier entry matches its name');
        $this->expectExceptionMessage('drover.environments has no entry staging (entries: *, production)');
        Pools::entry($config, 'staging');
    }

    public function testEntriesAndPoolsThatAreNotArraysAreNamed(): void
    {
        try {
            Pools::resolve(['defaults' => ['default' => []], 'environments' => ['staging' => 'production', 'local' => []]], 'local');
            $this->fail('expected InvalidConfig');
        } catch (InvalidConfig $e) {
            $this->assertSame(['drover.defaults and drover.environments.* must be arrays of pools: drover.environments.staging is string'], $e->problems);
        }
        try {
            Pools::resolve(['defaults' => ['default' => 4], 'environments' => ['local' => ['mail' => null]]], 'local');
            $this->fail('expected InvalidConfig');
        } catch (InvalidConfig $e) {
            $this->assertCount(2, $e->problems, $e->getMessage());
            $this->assertStringContainsString('drover.defaults.default must be an array of pool options', $e->problems[0]);
            $this->assertStringContainsString('drover.environments.local.mail must be an array of pool options', $e->problems[1]);
        }
    }

    public function testBalancedPoolsMustCoverTheirQueues(): void
    {
        $config = ['defaults' => [
            'split' => ['balance' => 'simple', 'queue' => ['a', 'b', 'c'], 'processes' => 2],
            'scaled' => ['balance' => 'auto', 'queue' => ['a', 'b', 'c'], 'min_processes' => 2, 'max_processes' => 5],
            'fine' => ['balance' => 'auto', 'queue' => ['a', 'b'], 'processes' => 4],
        ], 'environments' => ['*' => []]];
        try {
            Pools::resolve($config, 'local');
            $this->fail('expected InvalidConfig');
        } catch (InvalidConfig $e) {
            $this->assertSame([
                'pool split: balance simple splits processes between the queues; 2 processes cannot serve 3 queues (raise processes to at least 3)',
                'pool scaled: max_processes (5) is below min_processes (2) times the 3 queues (raise max_processes or lower min_processes)',
            ], $e->problems);
        }
    }

    public function testTheShippedAndTheFixtureConfigsRunTheirPoolsWhereTheyShould(): void
    {
        // storage_path() asks the application (Laravel 8: its path.storage binding; 12: its
        // storagePath()), so the configs are required inside one that is not booted.
        $previous = \Illuminate\Container\Container::getInstance();
        \Illuminate\Container\Container::setInstance(new \Illuminate\Foundation\Application('/srv/app'));
        try {
            $shipped = require __DIR__ . '/../config/drover.php';
            $fixture = require __DIR__ . '/../../tests/laravel-app/config/drover.php';
        } finally {
            \Illuminate\Container\Container::setInstance($previous);
        }
        $this->assertSame(['default'], array_keys(Pools::resolve($shipped, 'production')));
        $this->assertSame(['default'], array_keys(Pools::resolve($shipped, 'local')));
        $this->assertSame([], Pools::resolve($shipped, 'staging'), 'the shipped config has no entry for staging');
        foreach (['local', 'testing', 'production', 'ci'] as $environment) {
            $this->assertSame(['default'], array_keys(Pools::resolve($fixture, $environment)), "the fixture app runs its pool in $environment");
        }
    }
}
