<?php

namespace Drover\Tests;

use Drover\Config\HorizonImporter;
use Drover\Config\ImportFile;
use Drover\Config\Pools;
use Drover\Console\ImportHorizonCommand;
use Illuminate\Container\Container;
use PHPUnit\Framework\TestCase;
use Symfony\Component\Console\Input\ArrayInput;
use Symfony\Component\Console\Output\BufferedOutput;

/**
 * config/horizon.php → config/drover.php: the pools Horizon would run, environment by environment;
 * and `php artisan drover:import-horizon` run for real in a throwaway Laravel application.
 */
final class HorizonImporterTest extends TestCase
{
    private ?string $appDir = null;

    private ?Container $previousContainer = null;

    protected function tearDown(): void
    {
        if ($this->appDir !== null) {
            Container::setInstance($this->previousContainer);
            exec('rm -rf ' . escapeshellarg($this->appDir));
            $this->appDir = null;
        }
    }
    /** The shape of config/horizon.php as Horizon 5.29 publishes it (values as its env() defaults give them). */
    private function horizonsOwnConfig(): array
    {
        return [
            'domain' => null,
            'path' => 'horizon',
            'use' => 'default',
            'prefix' => 'laravel_horizon:',
            'middleware' => ['web'],
            'waits' => ['redis:default' => 60],
            'trim' => ['recent' => 60, 'pending' => 60, 'completed' => 60, 'recent_failed' => 10080, 'failed' => 10080, 'monitored' => 10080],
            'silenced' => [],
            'metrics' => ['trim_snapshots' => ['job' => 24, 'queue' => 24]],
            'fast_termination' => false,
            'memory_limit' => 64,
            'defaults' => [
                'supervisor-1' => [
                    'connection' => 'redis',
                    'queue' => ['default'],
                    'balance' => 'auto',
                    'autoScalingStrategy' => 'time',
                    'maxProcesses' => 1,
                    'maxTime' => 0,
                    'maxJobs' => 0,
                    'memory' => 128,
                    'tries' => 1,
                    'timeout' => 60,
                    'nice' => 0,
                ],
            ],
            'environments' => [
                'production' => [
                    'supervisor-1' => ['maxProcesses' => 10, 'balanceMaxShift' => 1, 'balanceCooldown' => 3],
                ],
                'local' => [
                    'supervisor-1' => ['maxProcesses' => 3],
                ],
            ],
        ];
    }

    /** @param list<string> $lines */
    private function assertNamed(string $needle, array $lines): void
    {
        $this->assertNotEmpty(array_filter($lines, fn ($l) => str_contains($l, $needle)), "'$needle' is not named in:\n" . implode("\n", $lines));
    }

    public function testHorizonsOwnDefaultConfigBecomesTheSamePoolsInTheSameEnvironments(): void
    {
        $import = new HorizonImporter($this->horizonsOwnConfig(), ['redis' => ['driver' => 'redis', 'queue' => 'default']]);
        $this->assertSame([], $import->problems());
        $this->assertSame(['supervisor-1' => [
            'connection' => 'drover',
            'queue' => ['default'],
            'balance' => 'auto',
            'autoscaling_strategy' => 'time',
            'max_processes' => 1,
            'max_time' => 0,
            'max_jobs' => 0,
            'memory' => 128,
            'tries' => 1,
            'timeout' => 60,
            'nice' => 0,
        ]], $import->defaults(), "balance auto: Horizon's maxProcesses is drover's max_processes");
        $this->assertSame([
            'production' => ['supervisor-1' => ['max_processes' => 10, 'balance_max_shift' => 1, 'balance_cooldown' => 3]],
            'local' => ['supervisor-1' => ['max_processes' => 3]],
        ], $import->environments());

        $production = Pools::resolve($import->pools(), 'production')['supervisor-1'];
        $this->assertSame(['auto', 10, 1, ['default'], 1], [$production['balance'], $production['max_processes'], $production['min_processes'], $production['queue'], $production['tries']]);
        $this->assertSame(3, Pools::resolve($import->pools(), 'local')['supervisor-1']['max_processes']);
        $this->assertSame([], Pools::resolve($import->pools(), 'staging'), 'Horizon runs nothing in an environment it has no entry for; neither does drover');

        foreach (['domain', 'path', 'use', 'prefix', 'middleware', 'waits', 'trim', 'silenced', 'metrics', 'fast_termination', 'memory_limit'] as $setting) {
            $this->assertNamed("$setting: ", $import->notCarriedOver());
        }
        $this->assertNamed('long-wait notifications', $import->notCarriedOver());
        $this->assertNamed("connection 'redis' (defaults.supervisor-1)", $import->remarks());
        $this->assertNamed('scale_down_delay', $import->remarks());
    }

    private function multiSupervisorConfig(): array
    {
        return [
            'env' => 'production',
            'waits' => ['redis:default' => 60],
            'defaults' => [
                'web' => [
                    'connection' => 'redis',
                    'queue' => ['high', 'default'],
                    'balance' => 'simple',
                    'processes' => 4,
                    'tries' => 3,
                    'backoff' => [1, 5, 10],
                    'timeout' => 90,
                    'workersName' => 'web-worker',
                ],
                'reports' => [
                    'connection' => 'redis-long',
                    'queue' => 'reports',
                    'balance' => false,
                    'maxProcesses' => 2,
                    'memory' => 512,
                    'max_time' => 3600,
                    'sleep' => 1,
                    'force' => true,
                    'rest' => 1,
                ],
                'imports' => [
                    'connection' => 'redis',
                    'queue' => ['imports', 'exports'],
                    'balance' => 'auto',
                    'autoScalingStrategy' => 'size',
                    'minProcesses' => 1,
                    'maxProcesses' => 6,
                    'balanceMaxShift' => 2,
                    'balanceCooldown' => 5,
                    'maxJobs' => 1000,
                ],
            ],
            'environments' => [
                'production-eu' => ['web' => ['processes' => 8]],
                'production*' => [
                    'web' => ['processes' => 6, 'queue' => ['urgent']],
                    'imports' => ['maxProcesses' => 12],
                    'mail' => ['connection' => 'redis', 'queue' => 'mail', 'nice' => 5, 'backoff' => '2,4', 'parentId' => 1],
                ],
                'local' => ['imports' => ['maxProcesses' => 0], 'reports' => ['balance' => 'auto', 'min_processes' => 2, 'maxProcesses' => 4]],
                '*' => [],
                'staging' => ['web' => ['processes' => 2]],
            ],
        ];
    }

    public function testSupervisorsEnvironmentsPatternsAndBalanceModesRunAsUnderHorizon(): void
    {
        $import = new HorizonImporter($this->multiSupervisorConfig(), ['redis' => ['queue' => 'default']]);
        $this->assertSame([], $import->problems(), implode("\n", $import->problems()));
        $pools = $import->pools();

        // production-eu: its own entry, defaults applied to every supervisor.
        $eu = Pools::resolve($pools, 'production-eu');
        $this->assertSame(['web', 'reports', 'imports'], array_keys($eu));
        $this->assertSame(['simple', 8, ['high', 'default'], 3, [1, 5, 10], 90], [$eu['web']['balance'], $eu['web']['processes'], $eu['web']['queue'], $eu['web']['tries'], $eu['web']['backoff'], $eu['web']['timeout']], "balance simple: Horizon's processes is drover's processes, split between the queues");
        $this->assertSame(['off', 2, 512, 3600, 0, 1, true, 1], [$eu['reports']['balance'], $eu['reports']['processes'], $eu['reports']['memory'], $eu['reports']['max_time'], $eu['reports']['tries'], $eu['reports']['sleep'], $eu['reports']['force'], $eu['reports']['rest']], "balance false is off; snake_case max_time is read as Horizon reads it; tries not set is Horizon's 0 (unlimited)");
        $this->assertSame(['auto', 6, 1, 'size', 2, 5, 1000], [$eu['imports']['balance'], $eu['imports']['max_processes'], $eu['imports']['min_processes'], $eu['imports']['autoscaling_strategy'], $eu['imports']['balance_max_shift'], $eu['imports']['balance_cooldown'], $eu['imports']['max_jobs']]);
        $this->assertSame('drover', $eu['reports']['connection']);

        // production-us: the pattern entry; Horizon merges ['urgent'] over ['high', 'default'] index by index.
        $us = Pools::resolve($pools, 'production-us');
        $this->assertSame(['web', 'reports', 'imports', 'mail'], array_keys($us));
        $this->assertSame(['urgent', 'default'], $us['web']['queue']);
        $this->assertSame(6, $us['web']['processes']);
        $this->assertSame(12, $us['imports']['max_processes']);
        $this->assertSame([['mail'], 5, [2, 4], 0, 'drover'], [$us['mail']['queue'], $us['mail']['nice'], $us['mail']['backoff'], $us['mail']['tries'], $us['mail']['connection']]);
        $this->assertNamed("environments.production*.web.queue: Horizon merges this list with defaults.web.queue index by index, giving ['urgent', 'default']", $import->remarks());

        // local: imports switched off with maxProcesses 0; reports becomes an auto pool.
        $local = Pools::resolve($pools, 'local');
        $this->assertSame(['web', 'reports'], array_keys($local));
        $this->assertSame(['auto', 4, 2], [$local['reports']['balance'], $local['reports']['max_processes'], $local['reports']['min_processes']]);
        $this->assertArrayNotHasKey('imports', $import->defaults(), 'a defaults pool switched off somewhere cannot stay in drover.defaults');
        $this->assertNamed('supervisor imports has maxProcesses 0 in local', $import->remarks());

        // Any other environment: the catch-all, which also shadows the staging entry after it.
        $this->assertSame('*', Pools::matchedEnvironment($pools, 'staging'));
        $testing = Pools::resolve($pools, 'testing');
        $this->assertSame(['web', 'reports', 'imports'], array_keys($testing));
        $this->assertSame(4, $testing['web']['processes']);
        $this->assertSame(6, $testing['imports']['max_processes']);
        $this->assertNamed("environments.staging is never used for environment 'staging': the earlier entry '*' matches first", $import->remarks());

        foreach (['env: ', 'waits: ', 'defaults.web.workersName: ', 'environments.production*.mail.parentId: '] as $option) {
            $this->assertNamed($option, $import->notCarriedOver());
        }
        $this->assertNamed("connection 'redis' (defaults.web, defaults.imports, environments.production*.mail)", $import->remarks());
        $this->assertNamed("connection 'redis-long' (defaults.reports)", $import->remarks());
        $this->assertNamed('now share drover\'s connection', $import->remarks());
        $this->assertNamed('supervisor reports has balance off with minProcesses below maxProcesses in production-eu, production*, *, staging (minProcesses 1, maxProcesses 2)', $import->remarks());
    }

    public function testValuesDroverRefusesAreNamedWithTheirPlaceAndNothingIsRendered(): void
    {
        $horizon = [
            'defaults' => ['supervisor-1' => ['connection' => 'redis', 'queue' => ['a', 'b', 'c'], 'balance' => 'auto', 'minProcesses' => 0, 'maxProcesses' => 5]],
            'environments' => [
                'production' => ['supervisor-1' => ['nice' => 25, 'balanceCooldown' => 0]],
                'local' => ['supervisor-2' => ['connection' => 'redis', 'balance' => 'single']],
            ],
        ];
        $import = new HorizonImporter($horizon);
        $this->assertSame([
            'config/horizon.php environments.local.supervisor-2.balance = \'single\': drover knows balance false (or off), simple and auto; set one of them',
            'config/horizon.php defaults.supervisor-1.minProcesses = 0: drover refuses it (min_processes must be a whole number from 1 to 4096, got 0)',
            'config/horizon.php environments.production.supervisor-1.nice = 25: drover refuses it (nice must be a whole number from -20 to 19, got 25)',
            'config/horizon.php environments.production.supervisor-1.balanceCooldown = 0: drover refuses it (balance_cooldown must be a number of seconds above 0 (1 ns at least) and at most 31536000 (a year), got 0)',
        ], $import->problems());
        $this->expectException(\LogicException::class);
        $import->render('2025-01-01');
    }

    public function testQueueCoverageHorizonWouldBendIsRefusedNotClamped(): void
    {
        $import = new HorizonImporter([
            'defaults' => ['split' => ['connection' => 'redis', 'queue' => ['a', 'b', 'c'], 'balance' => 'simple', 'maxProcesses' => 2]],
            'environments' => ['production' => []],
        ]);
        $this->assertSame(['config/horizon.php environments.production (with defaults applied): drover refuses pool split: balance simple splits processes between the queues; 2 processes cannot serve 3 queues (raise processes to at least 3)'], $import->problems());
    }

    public function testPoolNamesMissingQueuesAndAMissingEnvironmentsKey(): void
    {
        $import = new HorizonImporter(['defaults' => ['mail queue' => ['connection' => 'redis', 'maxProcesses' => 2]]], ['redis' => ['queue' => 'jobs']]);
        $this->assertSame([], $import->problems());
        $this->assertSame(['mail-queue' => ['connection' => 'drover', 'processes' => 2, 'tries' => 0, 'queue' => ['jobs']]], $import->defaults(), "no queue: Horizon works the connection's default queue");
        $this->assertSame([], $import->environments());
        $this->assertNamed("supervisor 'mail queue' is pool 'mail-queue'", $import->remarks());
        $this->assertNamed('config/horizon.php has no environments: Horizon runs no supervisor anywhere', $import->remarks());
        $this->assertSame([], Pools::resolve($import->pools(), 'production'));
    }

    public function testAConfigWithoutSupervisorsIsNotImported(): void
    {
        $this->assertSame(['config/horizon.php defines no supervisors (defaults and environments are empty): there is nothing to import'], (new HorizonImporter(['defaults' => [], 'environments' => ['production' => []]]))->problems());
        $this->assertSame(['config/horizon.php environments.production is string: an environment must be an array of supervisors'], (new HorizonImporter(['environments' => ['production' => 'supervisor-1']]))->problems());
    }

    public function testHorizonsKeyAliasesResolveAsHorizonResolvesThem(): void
    {
        // ProvisioningPlan::convert reads tries as maxTries and processes as maxProcesses, camelCases
        // every key, and the later of two aliases wins.
        $this->assertSame(['maxTries' => 2, 'maxProcesses' => 5, 'balanceMaxShift' => 3], HorizonImporter::horizonOptions(['tries' => 2, 'processes' => 3, 'max_processes' => 5, 'balance-max-shift' => 3]));
        $import = new HorizonImporter([
            'defaults' => ['s' => ['connection' => 'redis', 'queue' => 'q', 'processes' => 3, 'maxProcesses' => 4]],
            'environments' => ['production' => ['s' => ['processes' => 10]]],
        ]);
        // Horizon merges first: the entry's processes replaces the defaults' processes in place,
        // and the defaults' maxProcesses after it still wins. The pool gets 4, as under Horizon.
        $this->assertSame(4, Pools::resolve($import->pools(), 'production')['s']['processes']);
    }

    public function testTheRenderedFileIsACompleteConfigThatLoads(): void
    {
        $import = new HorizonImporter($this->multiSupervisorConfig(), ['redis' => ['queue' => 'default']]);
        $php = $import->render('2025-06-01');
        $this->assertStringStartsWith("<?php\n\n// config/drover.php, imported from config/horizon.php by `php artisan drover:import-horizon` on\n// 2025-06-01.", $php);
        foreach (['waits: long-wait notifications', 'workersName', 'parentId', 'env: '] as $named) {
            $this->assertStringContainsString($named, $php);
        }
        $this->assertStringContainsString("'state_dir' => env('DROVER_STATE_DIR', storage_path('drover')),", $php, 'env() calls are kept as the package ships them');
        $this->assertStringContainsString("'connection' => 'drover', // Horizon: 'redis'", $php);

        $file = tempnam(sys_get_temp_dir(), 'drover-import');
        file_put_contents($file, $php);
        // storage_path() asks the application (Laravel 8: its path.storage binding; 12: its
        // storagePath()): required inside one that is not booted.
        $previous = \Illuminate\Container\Container::getInstance();
        \Illuminate\Container\Container::setInstance(new \Illuminate\Foundation\Application('/srv/app'));
        try {
            $written = require $file;
            $shipped = require __DIR__ . '/../config/drover.php';
        } finally {
            \Illuminate\Container\Container::setInstance($previous);
            unlink($file);
        }
        $this->assertEqualsCanonicalizing(Pools::TOP_KEYS, array_keys($written), 'every top-level key, nothing else');
        foreach (array_diff(Pools::TOP_KEYS, ['defaults', 'environments']) as $key) {
            $this->assertSame($shipped[$key], $written[$key], "drover.$key as the package ships it");
        }
        $this->assertSame($import->defaults(), $written['defaults']);
        $this->assertSame($import->environments(), $written['environments']);
        foreach (['production-eu', 'production-us', 'local', 'testing'] as $environment) {
            $this->assertSame(Pools::resolve($import->pools(), $environment), Pools::resolve($written, $environment));
        }
    }

    /**
     * A Laravel application in a temporary directory, with config/horizon.php as Horizon publishes
     * it (env() and Str::slug included) and the queue connections Horizon's apps have.
     *
     * @param array<string, mixed> $config the application's loaded configuration
     */
    private function laravelApp(array $config = []): \Illuminate\Foundation\Application
    {
        $this->appDir = sys_get_temp_dir() . '/drover-import-' . getmypid() . '-' . bin2hex(random_bytes(4));
        mkdir($this->appDir . '/config', 0755, true);
        file_put_contents($this->appDir . '/config/horizon.php', <<<'PHP'
<?php

use Illuminate\Support\Str;

return [
    'domain' => env('HORIZON_DOMAIN'),
    'path' => env('HORIZON_PATH', 'horizon'),
    'use' => 'default',
    'prefix' => env('HORIZON_PREFIX', Str::slug(env('APP_NAME', 'laravel'), '_').'_horizon:'),
    'middleware' => ['web'],
    'waits' => ['redis:default' => 60],
    'trim' => ['recent' => 60, 'pending' => 60, 'completed' => 60, 'recent_failed' => 10080, 'failed' => 10080, 'monitored' => 10080],
    'silenced' => [],
    'metrics' => ['trim_snapshots' => ['job' => 24, 'queue' => 24]],
    'fast_termination' => false,
    'memory_limit' => 64,
    'defaults' => [
        'supervisor-1' => [
            'connection' => 'redis',
            'queue' => ['default'],
            'balance' => 'auto',
            'autoScalingStrategy' => 'time',
            'maxProcesses' => 1,
            'maxTime' => 0,
            'maxJobs' => 0,
            'memory' => 128,
            'tries' => 1,
            'timeout' => 60,
            'nice' => 0,
        ],
    ],
    'environments' => [
        'production' => ['supervisor-1' => ['maxProcesses' => 10, 'balanceMaxShift' => 1, 'balanceCooldown' => 3]],
        'local' => ['supervisor-1' => ['maxProcesses' => 3]],
    ],
];
PHP);
        $this->previousContainer = Container::getInstance();
        $app = new \Illuminate\Foundation\Application($this->appDir);
        $app->instance('config', new \Illuminate\Config\Repository($config + [
            'queue' => ['default' => 'redis', 'connections' => ['redis' => ['driver' => 'redis', 'connection' => 'default', 'queue' => 'default']]],
        ]));
        $app['env'] = 'production';
        return $app;
    }

    /** @return array{0: int, 1: string} exit status and output */
    private function importHorizon(\Illuminate\Foundation\Application $app, array $options = []): array
    {
        $command = new ImportHorizonCommand();
        $command->setLaravel($app);
        $output = new BufferedOutput();
        $status = $command->run(new ArrayInput($options), $output);
        return [$status, $output->fetch()];
    }

    public function testTheCommandWritesAConfigThatPoolsAccepts(): void
    {
        $app = $this->laravelApp();
        [$status, $output] = $this->importHorizon($app);
        $this->assertSame(0, $status, $output);
        $target = $this->appDir . '/config/drover.php';
        $this->assertStringContainsString("wrote $target from {$this->appDir}/config/horizon.php", $output);
        foreach (['waits', 'trim', 'silenced', 'metrics', 'fast_termination', 'memory_limit', 'prefix', 'middleware', 'domain', 'path', 'use'] as $setting) {
            $this->assertStringContainsString("not carried over: $setting: ", $output);
        }
        $this->assertStringContainsString("note: connection 'redis' (defaults.supervisor-1)", $output);
        $this->assertStringContainsString('next: set QUEUE_CONNECTION=drover (now: redis)', $output);
        $this->assertStringContainsString('next: config/queue.php has no drover connection', $output);
        $this->assertStringContainsString("this one, 'production', runs supervisor-1", $output);

        $config = require $target;
        $this->assertSame(Pools::TOP_KEYS, array_keys($config));
        $this->assertSame($this->appDir . '/storage/drover', $config['state_dir'], "env('DROVER_STATE_DIR', storage_path('drover')) evaluated in the application");
        $production = Pools::resolve($config, 'production');
        $this->assertSame(['drover', 'auto', 10, ['default']], [$production['supervisor-1']['connection'], $production['supervisor-1']['balance'], $production['supervisor-1']['max_processes'], $production['supervisor-1']['queue']]);
        $this->assertSame(3, Pools::resolve($config, 'local')['supervisor-1']['max_processes']);
        $this->assertSame([], Pools::resolve($config, 'staging'));
        $this->assertSame('production', Pools::matchedEnvironment($config, 'production'));

        // Run again: the file is there, so it is refused without --force and left alone.
        file_put_contents($target, "<?php return ['edited' => true];\n");
        [$status, $output] = $this->importHorizon($app);
        $this->assertSame(1, $status);
        $this->assertStringContainsString("drover:import-horizon: $target already exists; pass --force to overwrite it, or --dry-run to print the import instead", $output);
        $this->assertSame("<?php return ['edited' => true];\n", file_get_contents($target));

        // --dry-run prints it and writes nothing; --force overwrites.
        [$status, $output] = $this->importHorizon($app, ['--dry-run' => true]);
        $this->assertSame(0, $status, $output);
        $this->assertStringStartsWith("<?php\n\n// config/drover.php, imported from", $output);
        $this->assertStringContainsString("'max_processes' => 10,", $output);
        $this->assertSame("<?php return ['edited' => true];\n", file_get_contents($target));
        [$status, $output] = $this->importHorizon($app, ['--force' => true]);
        $this->assertSame(0, $status, $output);
        $this->assertSame(10, Pools::resolve(require $target, 'production')['supervisor-1']['max_processes']);
        $this->assertSame([], glob($this->appDir . '/config/.drover.php.import-*'), 'no temporary file left behind');
    }

    /**
     * The paths the import once wrote to and then loaded with `require` — /tmp/.drover.php.import-PID
     * for --dry-run, config/.drover.php.import-PID otherwise — planted beforehand, as another local
     * user could: a symlink to a file of ours, and a file of PHP. The import neither writes through
     * the one nor runs the other, and its own file is private.
     */
    public function testAPathPlantedWhereTheImportOnceWroteIsNeitherFollowedNorRun(): void
    {
        $app = $this->laravelApp();
        $victim = $this->appDir . '/victim.txt';
        file_put_contents($victim, "precious\n");
        $marker = $this->appDir . '/the-planted-php-ran';
        $php = "<?php file_put_contents(" . var_export($marker, true) . ", 'ran'); return ['defaults' => [], 'environments' => ['production' => []]];\n";
        $planted = [sys_get_temp_dir() . '/.drover.php.import-' . getmypid(), $this->appDir . '/config/.drover.php.import-' . getmypid()];
        try {
            foreach (['a symlink' => fn (string $path) => symlink($victim, $path), 'PHP' => fn (string $path) => file_put_contents($path, $php)] as $kind => $plant) {
                foreach ($planted as $path) {
                    @unlink($path);
                    $plant($path);
                }
                [$status, $output] = $this->importHorizon($app, ['--dry-run' => true]);
                $this->assertSame(0, $status, "$kind: $output");
                $this->assertStringStartsWith("<?php\n\n// config/drover.php, imported from", $output, $kind);
                $this->assertStringContainsString("'max_processes' => 10,", $output, $kind);
                [$status, $output] = $this->importHorizon($app, ['--force' => true]);
                $this->assertSame(0, $status, "$kind: $output");
                $target = $this->appDir . '/config/drover.php';
                $this->assertSame(10, Pools::resolve(require $target, 'production')['supervisor-1']['max_processes'], $kind);
                $this->assertSame(0666 & ~umask(), fileperms($target) & 0777, 'config/drover.php gets the mode any file written there would');
                $this->assertSame("precious\n", file_get_contents($victim), "$kind: nothing is written through a planted symlink");
                $this->assertFileDoesNotExist($marker, "$kind: planted PHP is not run");
                foreach ($planted as $path) {
                    $this->assertTrue(is_link($path) || file_get_contents($path) === $php, "$kind: $path is left as planted");
                }
                $this->assertSame([$planted[1]], glob($this->appDir . '/config/.drover.php.import-*'), 'no file of its own left behind');
            }
        } finally {
            foreach ($planted as $path) {
                @unlink($path);
            }
        }

        // Its own file: a new, unpredictable name, mode 0600 from the start.
        $dir = $this->appDir . '/private';
        mkdir($dir);
        $one = ImportFile::create($dir, '<?php return 1;');
        $two = ImportFile::create($dir, '<?php return 2;');
        $this->assertNotSame($one, $two);
        $this->assertMatchesRegularExpression('~/\.drover\.php\.import-[0-9a-f]{32}$~', $one);
        $this->assertSame(0600, fileperms($one) & 0777);
        $this->assertSame(2, require $two);
        chmod($dir, 0500);
        try {
            if (posix_geteuid() !== 0) {
                ImportFile::create($dir, 'x');
                $this->fail('a directory it may not write to is refused');
            }
        } catch (\RuntimeException $e) {
            $this->assertStringStartsWith("cannot create a file in $dir: ", $e->getMessage());
        } finally {
            chmod($dir, 0700);
        }
    }

    public function testTheCommandPrefersTheLoadedConfigAndRefusesValuesDroverCannotTake(): void
    {
        $app = $this->laravelApp(['horizon' => [
            'defaults' => ['supervisor-1' => ['connection' => 'redis', 'queue' => 'default', 'nice' => 30]],
            'environments' => ['production' => []],
        ]]);
        [$status, $output] = $this->importHorizon($app);
        $this->assertSame(1, $status);
        $this->assertStringContainsString('config/horizon.php defaults.supervisor-1.nice = 30: drover refuses it (nice must be a whole number from -20 to 19, got 30)', $output);
        $this->assertStringContainsString('drover:import-horizon: nothing written. Fix these values in config/horizon.php', $output);
        $this->assertFileDoesNotExist($this->appDir . '/config/drover.php');

        [$status, $output] = $this->importHorizon($app, ['--path' => $this->appDir . '/config/missing.php']);
        $this->assertSame(1, $status);
        $this->assertStringContainsString("{$this->appDir}/config/missing.php does not exist", $output);
    }
}
