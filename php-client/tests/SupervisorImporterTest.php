<?php

namespace Drover\Tests;

use Drover\Config\Pools;
use Drover\Config\SupervisorImporter;
use Drover\Console\ImportSupervisorCommand;
use Illuminate\Container\Container;
use PHPUnit\Framework\TestCase;
use Symfony\Component\Console\Input\ArrayInput;
use Symfony\Component\Console\Output\BufferedOutput;

/**
 * supervisord's program files → config/drover.php: the pools queue:work ran, read as supervisord
 * reads the files; and `php artisan drover:import-supervisor` run for real in a throwaway Laravel
 * application. The Forge-style fixtures are tests/fixtures/supervisor/, which tests/laravel.rs
 * imports end to end too.
 */
final class SupervisorImporterTest extends TestCase
{
    private const FIXTURES = __DIR__ . '/../../tests/fixtures/supervisor';

    private static function fixtureDir(): string
    {
        return (string) realpath(self::FIXTURES);
    }

    /** The fixture app's queue connections (tests/laravel-app/config/queue.php), as loaded. */
    private const CONNECTIONS = [
        'sync' => ['driver' => 'sync'],
        'database' => ['driver' => 'database', 'connection' => 'pgsql', 'table' => 'jobs', 'queue' => 'default'],
        'redis' => ['driver' => 'redis', 'connection' => 'default', 'queue' => 'default'],
        'drover' => ['driver' => 'drover', 'connection' => 'pgsql', 'queue' => 'default'],
        'failover' => ['driver' => 'failover', 'connections' => ['drover', 'redis']],
    ];

    private ?string $dir = null;

    private ?Container $previousContainer = null;

    protected function tearDown(): void
    {
        if ($this->previousContainer !== null) {
            Container::setInstance($this->previousContainer);
            $this->previousContainer = null;
        }
        if ($this->dir !== null) {
            exec('rm -rf ' . escapeshellarg($this->dir));
            $this->dir = null;
        }
    }

    /** Writes $files (name => text) into a fresh directory; their paths. */
    private function files(array $files): array
    {
        $this->dir ??= sys_get_temp_dir() . '/drover-supervisor-' . getmypid() . '-' . bin2hex(random_bytes(4));
        $paths = [];
        foreach ($files as $name => $text) {
            $path = "{$this->dir}/$name";
            @mkdir(dirname($path), 0755, true);
            file_put_contents($path, $text);
            $paths[] = $path;
        }
        return $paths;
    }

    /** One program section around $command (and more settings). */
    private function import(string $command, string $more = '', array $options = []): SupervisorImporter
    {
        return new SupervisorImporter($this->files(['w.conf' => "[program:w]\ncommand=$command\n$more"]), self::CONNECTIONS, 'redis', $options + ['base_path' => '/srv/app']);
    }

    /** @param list<string> $lines */
    private function assertNamed(string $needle, array $lines): void
    {
        $this->assertNotEmpty(array_filter($lines, fn ($l) => str_contains($l, $needle)), "'$needle' is not named in:\n" . implode("\n", $lines));
    }

    private function fixtures(): SupervisorImporter
    {
        return new SupervisorImporter(glob(self::fixtureDir() . '/*.conf'), self::CONNECTIONS, 'drover', ['base_path' => '/home/forge/example.com']);
    }

    public function testForgesFilesAndAHandWrittenOneBecomeOnePoolPerQueueWorker(): void
    {
        $import = $this->fixtures();
        $this->assertSame([], $import->problems(), implode("\n", $import->problems()));
        $this->assertSame([
            'reports' => ['connection' => 'drover', 'queue' => ['reports'], 'processes' => 1, 'tries' => 1, 'timeout' => 0, 'nice' => 5],
            'imports' => ['connection' => 'drover', 'queue' => ['imports', 'default'], 'processes' => 2, 'max_jobs' => 500],
            'worker-481516' => ['connection' => 'drover', 'queue' => ['high', 'default'], 'processes' => 2, 'tries' => 3, 'timeout' => 90, 'backoff' => 5, 'sleep' => 3],
            'worker-481517' => ['connection' => 'drover', 'queue' => ['mail'], 'processes' => 1, 'memory' => 256, 'max_jobs' => 1, 'max_time' => 3600, 'force' => true],
        ], $import->defaults(), 'numprocs is processes, the flags their pool keys, --once is max_jobs 1; %(program_name)s expanded in imports\' --queue, the continuation line read');
        $this->assertSame(['user' => "env('DROVER_USER', 'forge')", 'shutdown_grace' => '600'], $import->settings(), 'every program runs as forge; the longest stopwaitsecs');
        foreach (['production', 'local', 'staging'] as $environment) {
            $this->assertSame(['reports', 'imports', 'worker-481516', 'worker-481517'], array_keys(Pools::resolve($import->pools(), $environment)), "supervisord ran them whatever the environment: so does '*' ($environment)");
        }

        $this->assertSame([
            '[program:scheduler] (' . self::fixtureDir() . '/example.conf:20): runs the schedule (`artisan schedule:work`): `php artisan drover` runs it now, with onOneServer() once across hosts and a history (docs/schedule.md); remove this program, or both would run each task',
            '[program:horizon] (' . self::fixtureDir() . '/example.conf:24): runs Laravel Horizon (`artisan horizon`): import config/horizon.php with `php artisan drover:import-horizon` (docs/migrating-from-horizon.md)',
            '[program:ssr] (' . self::fixtureDir() . '/example.conf:29): not a queue worker (runs `node /home/forge/example.com/bootstrap/ssr/ssr.mjs`)',
        ], $import->skipped());
        foreach ([
            'environment=APP_ENV,REPORTS_BUCKET ([program:reports])',
            'stdout_logfile, stderr_logfile, redirect_stderr … ([program:reports], [program:worker-481516], [program:worker-481517])',
            '--name ([program:imports])',
            'php -d memory_limit=512M ([program:imports])',
            '--daemon ([program:worker-481516]): deprecated',
            '--quiet ([program:worker-481516])',
            'php8.2 ([program:worker-481516], [program:worker-481517]): drover\'s workers run the PHP that runs `php artisan drover`',
            'stopasgroup=true',
            'startsecs, startretries ([program:worker-481516])',
        ] as $named) {
            $this->assertNamed($named, $import->notCarriedOver());
        }
        foreach ([
            "connection 'redis' (worker-481516): written as 'connection' => 'drover'",
            "connection 'database' (worker-481517)",
            'programs of different connections (redis, database) now share the drover connection',
            "[program:reports] names no connection: queue:listen worked the default one, config('queue.default'), which is 'drover' here",
            '--sleep (worker-481516)',
            'queue:listen (reports): it boots the application anew for every job',
            'drover.shutdown_grace = 600',
            'user=forge: written as drover.user',
        ] as $named) {
            $this->assertNamed($named, $import->remarks());
        }
        $this->assertSame([], array_filter($import->remarks(), fn ($l) => str_contains($l, 'the workers ran')), 'the workers ran this application\'s artisan: nothing to say');
        $this->assertSame([], array_filter($import->notCarriedOver(), fn ($l) => str_starts_with($l, 'directory=')), 'directory= is the application\'s own: nothing to say');
    }

    public function testTheLaravelDocsProgramAndQueueWorksDefaultsAreDroversOwn(): void
    {
        // The example of Laravel's queue documentation, verbatim.
        $import = new SupervisorImporter($this->files(['laravel-worker.conf' => <<<'INI'
[program:laravel-worker]
process_name=%(program_name)s_%(process_num)02d
command=php /home/forge/app.com/artisan queue:work sqs --sleep=3 --tries=3 --max-time=3600
autostart=true
autorestart=true
stopasgroup=true
killasgroup=true
user=forge
numprocs=8
redirect_stderr=true
stdout_logfile=/home/forge/app.com/worker.log
stopwaitsecs=3600
INI]), self::CONNECTIONS, 'redis', ['base_path' => '/var/www/app']);
        $this->assertSame([], $import->problems());
        $this->assertSame(['laravel-worker' => ['connection' => 'drover', 'queue' => ['default'], 'processes' => 8, 'tries' => 3, 'max_time' => 3600, 'sleep' => 3]], $import->defaults());
        $this->assertNamed("[program:laravel-worker] works connection 'sqs', which config/queue.php does not define here", $import->remarks());
        $this->assertNamed('the workers ran /home/forge/app.com/artisan; drover\'s workers run the artisan of the application the master is started from', $import->remarks());

        // A flag not given is a key not written: that is only right while queue:work's defaults, in
        // the Laravel this runs on, are drover's.
        $defaults = [];
        foreach ([\Illuminate\Queue\Console\WorkCommand::class, \Illuminate\Queue\Console\ListenCommand::class] as $class) {
            $signature = (new \ReflectionClass($class))->getDefaultProperties()['signature'];
            [, , $options] = \Illuminate\Console\Parser::parse($signature);
            foreach ($options as $option) {
                $defaults[$class][$option->getName()] = $option->getDefault();
            }
        }
        $work = $defaults[\Illuminate\Queue\Console\WorkCommand::class];
        $pool = Pools::POOL_DEFAULTS;
        $this->assertEquals(
            [$pool['tries'], $pool['timeout'], $pool['memory'], $pool['sleep'], $pool['rest'], $pool['backoff'], $pool['max_jobs'], $pool['max_time'], $pool['force']],
            [$work['tries'], $work['timeout'], $work['memory'], $work['sleep'], $work['rest'], $work['backoff'], $work['max-jobs'], $work['max-time'], $work['force']],
            "queue:work's defaults in Laravel " . \Illuminate\Foundation\Application::VERSION,
        );
        $listen = $defaults[\Illuminate\Queue\Console\ListenCommand::class];
        $this->assertEquals([$pool['tries'], $pool['timeout'], $pool['memory'], $pool['sleep'], $pool['backoff']], [$listen['tries'], $listen['timeout'], $listen['memory'], $listen['sleep'], $listen['backoff']]);
        foreach ($work + $listen as $option => $default) {
            $this->assertTrue(in_array($option, ['connection', 'queue', 'name', 'daemon', 'once', 'stop-when-empty', 'stop-when-empty-for', 'delay', 'backoff', 'max-jobs', 'max-time', 'force', 'memory', 'sleep', 'rest', 'timeout', 'tries', 'json'], true), "queue:work --$option of Laravel " . \Illuminate\Foundation\Application::VERSION . ' is known to the importer');
        }
    }

    public function testFilesAreReadAsSupervisordReadsThem(): void
    {
        $paths = $this->files([
            'supervisord.conf' => "[unix_http_server]\nfile=/run/supervisor.sock\n\n[supervisord]\nlogfile=/var/log/supervisord.log\n\n[include]\nfiles = conf.d/*.conf %(here)s/extra.ini\n",
            'conf.d/a.conf' => "# a comment\n[group:site]\nprograms = mail\n\n[program:mail]\ncommand : php /srv/app/artisan queue:work redis ; an inline comment\n    --queue=%(group_name)s-%(program_name)s,default\n    --tries=%(ENV_MAIL_TRIES)s\nprocess_name=%(program_name)s_%(process_num)02d\nnumprocs = 3\n",
            'conf.d/b.conf' => "[program:mail]\nnumprocs=4\nenvironment=A=\"1\",B=\"x%%y\"\n",
            'extra.ini' => "[program:percent]\ncommand=php /srv/app/artisan queue:work --queue=100%%\n",
        ]);
        $import = new SupervisorImporter([$paths[0]], self::CONNECTIONS, 'redis', ['env' => ['MAIL_TRIES' => '5'], 'base_path' => '/srv/app']);
        $this->assertSame([], $import->problems(), implode("\n", $import->problems()));
        $this->assertSame([$paths[0], $paths[1], $paths[2], $paths[3]], $import->files(), 'the [include]d files, in supervisord\'s order');
        $this->assertSame(['connection' => 'drover', 'queue' => ['site-mail', 'default'], 'processes' => 4, 'tries' => 5], $import->defaults()['mail'], "`key : value`, an inline comment, indented continuation lines, %(group_name)s of its [group], %(ENV_X)s, and a later file's numprocs merged in");
        $this->assertSame(['100%'], $import->defaults()['percent']['queue'], '%% is a percent sign');
        $this->assertNamed("[program:mail] is in {$paths[1]}:5 and {$paths[2]}:1: supervisord reads all its files into one configuration and merges them", $import->remarks());
        $this->assertNamed('environment=A,B', $import->notCarriedOver());
    }

    public function testCommandLinesAreSplitAsShlexSplitsThem(): void
    {
        $this->assertSame(['php', 'artisan', 'queue:work', '--queue=high,default', 'a b', "it's", 'c"d', 'e\\f'], SupervisorImporter::split("php  artisan queue:work --queue=\"high,default\" 'a b' it\\'s \"c\\\"d\" 'e\\f'"));
        $this->assertSame(['a', ''], SupervisorImporter::split("a ''"));
        $this->assertNull(SupervisorImporter::split('php artisan "queue:work', $error));
        $this->assertSame('its " quote is never closed', $error);
        $this->assertNull(SupervisorImporter::split('php artisan \\', $error));
        $this->assertSame('it ends with a backslash that escapes nothing', $error);
    }

    public function testWrappersAndFlagsMapToTheirPoolKeys(): void
    {
        $pool = fn (SupervisorImporter $i) => $i->problems() === [] ? $i->defaults()['w'] : $i->problems();
        $this->assertSame(['connection' => 'drover', 'queue' => ['a'], 'processes' => 1, 'backoff' => 7, 'nice' => 10], $pool($this->import('nice /usr/bin/php8.3 /srv/app/artisan queue:work redis --queue a --delay=7 --backoff=2')), "`nice` alone is 10; --queue's value as its own word; queue:work retries after the larger of --backoff and --delay");
        $this->assertSame(['connection' => 'drover', 'queue' => ['default'], 'processes' => 1, 'backoff' => [1, 5, 10], 'nice' => -5], $pool($this->import('nice --adjustment=-5 php /srv/app/artisan queue:work --backoff=1,5,10')));
        $this->assertSame(['connection' => 'drover', 'queue' => ['b'], 'processes' => 1, 'max_jobs' => 1, 'nice' => 3], $pool($this->import("bash -c 'cd /srv/app && exec nice -3 php artisan queue:work --queue=b --once --max-jobs=9'")), 'sh -c: cd and exec understood');
        $this->assertNamed('queue:listen has no option --stop-when-empty', $this->import('php /srv/app/artisan queue:listen --stop-when-empty')->problems());
        $import = $this->import('env APP_DEBUG=0 php /srv/app/artisan --env=production queue:listen drover -qn --delay=3 --rest=0.5 --timeout 120');
        $this->assertSame(['connection' => 'drover', 'queue' => ['default'], 'processes' => 1, 'timeout' => 120, 'rest' => 0.5], $import->defaults()['w'], 'a drover connection is kept');
        foreach (['--env=production ([program:w]): the worker ran in environment \'production\'', '--quiet', '--no-interaction', 'env APP_DEBUG=…', "--delay ([program:w]): queue:listen passes --backoff"] as $named) {
            $this->assertNamed($named, $import->notCarriedOver());
        }

        // No --queue on a connection whose default queue is not drover's: the pool serves drover's.
        $import = new SupervisorImporter($this->files(['w.conf' => "[program:w]\ncommand=php /srv/app/artisan queue:work redis\n"]), ['redis' => ['driver' => 'redis', 'queue' => 'jobs'], 'drover' => ['driver' => 'drover', 'queue' => 'main']], 'redis');
        $this->assertSame(['main'], $import->defaults()['w']['queue']);
        $this->assertNamed("it worked connection redis's default queue 'jobs'; jobs dispatched without a queue go to the drover connection's default 'main'", $import->remarks());
    }

    public function testSkippedProgramsSayWhy(): void
    {
        $import = new SupervisorImporter($this->files(['s.conf' => <<<'INI'
[program:web]
command=php /srv/app/artisan queue:work redis
[program:octane]
command=php /srv/app/artisan octane:start --port=8000
[program:drover]
command=php /srv/app/artisan drover
[program:help]
command=php /srv/app/artisan queue:work --help
[program:off]
command=php /srv/app/artisan queue:work
numprocs=0
[program:script]
command=php /srv/app/worker.php
[eventlistener:crashmail]
command=crashmail -a
events=PROCESS_STATE_EXITED
INI]), self::CONNECTIONS, 'redis');
        $this->assertSame([], $import->problems());
        $this->assertSame(['web'], array_keys($import->defaults()));
        $skipped = $import->skipped();
        foreach (['[program:octane]', 'runs `artisan octane:start`', '[program:drover] (', 'already runs drover', '[program:help]', 'prints its help', '[program:off]', 'numprocs=0, supervisord starts no process of it', '[program:script]', 'runs `php /srv/app/worker.php`', '[eventlistener:crashmail]', 'a supervisord event listener'] as $named) {
            $this->assertNamed($named, $skipped);
        }
    }

    public function testBadInputIsNamedWithItsFileAndLineAndNothingIsImported(): void
    {
        $dir = sys_get_temp_dir();
        $missing = "$dir/drover-no-such-" . getmypid() . '.conf';
        $this->assertSame(["$missing: no such file; pass supervisord's program files, e.g. /etc/supervisor/conf.d/*.conf"], (new SupervisorImporter([$missing]))->problems());
        [$a] = $this->files(['d/x.conf' => '']);
        $this->assertSame([dirname($a) . ': a directory; pass the files in it, e.g. ' . dirname($a) . '/*.conf'], (new SupervisorImporter([dirname($a)]))->problems());
        $this->assertSame(['no supervisord file given: pass the files of your queue workers, e.g. /etc/supervisor/conf.d/*.conf (Forge writes one per worker there)'], (new SupervisorImporter([]))->problems());

        $cases = [
            "command=php artisan queue:work\n" => 'f.conf:1: `command=php artisan queue:work` comes before any section',
            "[program:w]\njust words\n" => 'f.conf:2: `just words` is neither a section ([program:NAME]) nor a setting (key=value)',
            "[supervisord]\nlogfile=/tmp/x\n" => 'f.conf: no [program:NAME] section (nor an [include])',
            "[program:w]\nnumprocs=2\n" => 'f.conf:1 [program:w] has no command= (supervisord refuses such a program)',
            "[program:w]\ncommand=php /srv/app/artisan queue:work --queue='a\n" => "f.conf:2 [program:w] command=php /srv/app/artisan queue:work --queue='a: its ' quote is never closed",
            "[program:w]\ncommand=php /srv/app/artisan queue:work --tries=3 --sleeep=1\n" => 'f.conf:2 [program:w] command=php /srv/app/artisan queue:work --tries=3 --sleeep=1: queue:work has no option --sleeep (Laravel refuses the command as written',
            "[program:w]\ncommand=php /srv/app/artisan queue:work --force=1\n" => "queue:work's --force takes no value",
            "[program:w]\ncommand=php /srv/app/artisan queue:work redis sqs\n" => 'queue:work takes one argument, the connection, and this has 2 (redis, sqs)',
            "[program:w]\ncommand=php /srv/app/artisan queue:work --tries=three\n" => 'f.conf:1 [program:w] command: --tries=three: a whole number of 0 or more, as queue:work reads it',
            "[program:w]\ncommand=php /srv/app/artisan queue:work --backoff=1,x\n" => '--backoff=1,x: whole seconds, or a list of them separated by commas',
            "[program:w]\ncommand=php /srv/app/artisan queue:work\nnumprocs=4\n" => 'f.conf:1 [program:w] process_name: with numprocs=4 supervisord refuses a process_name without %(process_num)',
            "[program:w]\ncommand=php /srv/app/artisan queue:work\nnumprocs=two\n" => 'f.conf:3 [program:w] numprocs=two: supervisord wants a whole number',
            "[program:w]\ncommand=php /srv/app/artisan queue:work --queue=%(program)s\n" => 'f.conf:2 [program:w] command: supervisord cannot expand %(program)s',
            "[program:w]\ncommand=php /srv/app/artisan queue:work --queue=100%\n" => 'f.conf:2 [program:w] command: a % that supervisord cannot expand; write %% for a percent sign',
            "[program:w]\ncommand=php /srv/app/artisan queue:work --queue=%(ENV_DROVER_TEST_UNSET)s\n" => 'names the environment variable DROVER_TEST_UNSET, which is not set here',
            "[program:w]\ncommand=timeout 3600 php /srv/app/artisan queue:work\n" => 'runs queue:work through `timeout`, which the import does not understand; write the command as `php /path/to/artisan queue:work …`',
            "[program:w]\ncommand=sh -c 'php /srv/app/artisan queue:work >> /tmp/log 2>&1'\n" => 'runs queue:work through a `sh -c` script with pipes or redirections',
            "[program:w]\ncommand=php /srv/app/artisan queue:work --queue=q%(process_num)d\nprocess_name=%(program_name)s_%(process_num)d\nnumprocs=2\n" => 'its processes run different workers (process 0: php /srv/app/artisan queue:work --queue=q0; process 1: php /srv/app/artisan queue:work --queue=q1); a drover pool runs all its workers alike',
            "[program:w]\ncommand=nice -n 25 php /srv/app/artisan queue:work\n" => "f.conf:1 [program:w]: drover refuses the pool 'w' it becomes (pool w: nice must be a whole number from -20 to 19, got 25)",
            "[program:w]\ncommand=php /srv/app/artisan queue:work\n[program:w!]\ncommand=php /srv/app/artisan queue:work\n" => "programs w and w! would both become drover pool 'w'",
            "[program:w]\ncommand=php /srv/app/artisan schedule:work\n" => 'runs `php artisan queue:work` or `queue:listen` (skipped: [program:w]',
        ];
        foreach ($cases as $text => $expected) {
            $this->dir = null;
            [$path] = $this->files(['f.conf' => $text]);
            $problems = (new SupervisorImporter([$path], self::CONNECTIONS, 'redis', ['env' => []]))->problems();
            $this->assertNotEmpty($problems, $text);
            $this->assertStringContainsString(str_replace('f.conf', $path, $expected), implode("\n", $problems), $text);
            exec('rm -rf ' . escapeshellarg((string) $this->dir));
        }
    }

    public function testSeveralApplicationsConnectionsAndUsers(): void
    {
        $paths = $this->files([
            'a.conf' => "[program:shop]\ncommand=php /srv/shop/artisan queue:work redis\nuser=shop\n[program:shop-mail]\ndirectory=/srv/shop\ncommand=php artisan queue:work sqs --queue=mail\nuser=www-data\n",
            'b.conf' => "[program:blog]\ncommand=php /srv/blog/current/artisan queue:work\n",
        ]);
        $problems = (new SupervisorImporter($paths, self::CONNECTIONS, 'redis'))->problems();
        $this->assertSame(["the files run the queue workers of several applications (/srv/shop: shop, shop-mail; /srv/blog/current: blog): pass --directory=DIR, the directory of the one to import (its artisan's)"], $problems);

        // This application's own workers are the default; --directory picks any.
        $shop = new SupervisorImporter($paths, self::CONNECTIONS, 'redis', ['base_path' => '/srv/shop/']);
        $this->assertSame(['shop', 'shop-mail'], array_keys($shop->defaults()));
        $this->assertNamed('[program:blog] (' . $paths[1] . ':1): the queue worker of another application (/srv/blog/current/artisan)', $shop->skipped());
        $this->assertNamed("the programs run as different users (shop: shop; www-data: shop-mail): one drover master runs all its workers as one user, drover.user, so the import wrote none", $shop->remarks());
        $this->assertArrayNotHasKey('user', $shop->settings());
        $blog = new SupervisorImporter($paths, self::CONNECTIONS, 'redis', ['directory' => '/srv/blog/current', 'base_path' => '/srv/shop']);
        $this->assertSame(['blog'], array_keys($blog->defaults()));
        $this->assertNamed('the workers ran /srv/blog/current/artisan', $blog->remarks());
        $this->assertSame(['--directory=/srv/nowhere: no queue worker of the files runs /srv/nowhere/artisan (they run: /srv/shop, /srv/blog/current)'], (new SupervisorImporter($paths, self::CONNECTIONS, 'redis', ['directory' => '/srv/nowhere']))->problems());

        // --connection: only the programs of those connections.
        $redis = new SupervisorImporter($paths, self::CONNECTIONS, 'redis', ['base_path' => '/srv/shop', 'connections' => ['redis']]);
        $this->assertSame(['shop'], array_keys($redis->defaults()));
        $this->assertNamed('[program:shop-mail] (' . $paths[0] . ':4): works connection sqs, and --connection selects redis', $redis->skipped());
        $this->assertSame(['user' => "env('DROVER_USER', 'shop')"], $redis->settings(), 'the one imported program\'s user');
        $this->assertSame(["no queue worker of {$paths[0]}, {$paths[1]} works the connections --connection selects (beanstalkd): there is nothing to import (skipped: [program:blog] ({$paths[1]}:1): the queue worker of another application (/srv/blog/current/artisan); [program:shop] ({$paths[0]}:1): works connection redis, and --connection selects beanstalkd; [program:shop-mail] ({$paths[0]}:4): works connection sqs, and --connection selects beanstalkd)"], (new SupervisorImporter($paths, self::CONNECTIONS, 'redis', ['base_path' => '/srv/shop', 'connections' => ['beanstalkd']]))->problems());
    }

    public function testTheRenderedFileIsACompleteConfigThatLoads(): void
    {
        $import = $this->fixtures();
        $php = $import->render('2025-06-01');
        $this->assertStringStartsWith("<?php\n\n// config/drover.php, imported from " . self::fixtureDir() . '/example.conf', $php);
        foreach (["'connection' => 'drover', // supervisord: queue:work redis", "'max_jobs' => 1, // --once: one job per worker", "'processes' => 2, // numprocs", "'user' => env('DROVER_USER', 'forge') /* supervisord user= */,", "'shutdown_grace' => 600 /* supervisord stopwaitsecs, the longest of the programs */,", "'state_dir' => env('DROVER_STATE_DIR', storage_path('drover')),", '// Skipped (not queue workers, or not selected):', "'environments' => [\n        '*' => [],\n    ],"] as $needle) {
            $this->assertStringContainsString($needle, $php);
        }
        // Comments are wrapped to the line length, where depends on the fixtures' path: read the
        // skip reasons with the wrapping undone.
        $this->assertStringContainsString('runs Laravel Horizon', preg_replace('#\n\s*//\s+#', ' ', $php));
        $file = tempnam(sys_get_temp_dir(), 'drover-import');
        file_put_contents($file, $php);
        $this->previousContainer = Container::getInstance();
        // storage_path() asks the application (Laravel 8: path.storage; 12: storagePath()).
        Container::setInstance(new \Illuminate\Foundation\Application('/srv/app'));
        putenv('DROVER_USER');
        try {
            $written = require $file;
            $shipped = require __DIR__ . '/../config/drover.php';
            putenv('DROVER_USER=www-data');
            $overridden = require $file;
        } finally {
            putenv('DROVER_USER');
            unlink($file);
        }
        $this->assertEqualsCanonicalizing(Pools::TOP_KEYS, array_keys($written), 'every top-level key, nothing else');
        foreach (array_diff(Pools::TOP_KEYS, ['defaults', 'environments', 'user', 'shutdown_grace']) as $key) {
            $this->assertSame($shipped[$key], $written[$key], "drover.$key as the package ships it");
        }
        $this->assertSame(['forge', 600, 'www-data'], [$written['user'], $written['shutdown_grace'], $overridden['user']]);
        $this->assertSame($import->defaults(), $written['defaults']);
        $this->assertSame(Pools::resolve($import->pools(), 'production'), Pools::resolve($written, 'production'));
    }

    /** A Laravel application in a temporary directory with the fixture app's queue connections. */
    private function laravelApp(): \Illuminate\Foundation\Application
    {
        $this->files(['config/.keep' => '']);
        $this->previousContainer = Container::getInstance();
        $app = new \Illuminate\Foundation\Application($this->dir);
        $app->instance('config', new \Illuminate\Config\Repository(['queue' => ['default' => 'redis', 'connections' => self::CONNECTIONS]]));
        $app['env'] = 'production';
        return $app;
    }

    /** @return array{0: int, 1: string} exit status and output */
    private function importSupervisor(\Illuminate\Foundation\Application $app, array $input): array
    {
        $command = new ImportSupervisorCommand();
        $command->setLaravel($app);
        $output = new BufferedOutput();
        $status = $command->run(new ArrayInput($input), $output);
        return [$status, $output->fetch()];
    }

    public function testTheCommandWritesAConfigThatPoolsAcceptsAndNeverOverwritesUnasked(): void
    {
        $app = $this->laravelApp();
        $files = glob(self::fixtureDir() . '/*.conf');
        [$status, $output] = $this->importSupervisor($app, ['files' => $files]);
        $this->assertSame(0, $status, $output);
        $target = $this->dir . '/config/drover.php';
        $this->assertStringContainsString("drover:import-supervisor: wrote $target from " . implode(', ', $files), $output);
        $this->assertStringContainsString('pools: reports (1 × reports), imports (2 × imports,default), worker-481516 (2 × high,default), worker-481517 (1 × mail), in every environment', $output);
        $this->assertStringContainsString('not carried over: --daemon ([program:worker-481516]): deprecated', $output);
        $this->assertStringContainsString('skipped: [program:horizon] (', $output);
        $this->assertStringContainsString("note: connection 'redis' (reports, worker-481516)", $output, 'queue:listen without a connection: the default one, redis here');
        $this->assertStringContainsString('next: set QUEUE_CONNECTION=drover (now: redis)', $output);
        $this->assertStringNotContainsString('config/queue.php has no drover connection', $output);
        $config = require $target;
        $this->assertSame(['reports', 'imports', 'worker-481516', 'worker-481517'], array_keys(Pools::resolve($config, 'production')));

        // The file is there: refused without --force and left alone; --dry-run prints; --force writes.
        file_put_contents($target, "<?php return ['edited' => true];\n");
        [$status, $output] = $this->importSupervisor($app, ['files' => $files]);
        $this->assertSame(1, $status);
        $this->assertStringContainsString("drover:import-supervisor: $target already exists; pass --force to overwrite it, or --dry-run to print the import instead", $output);
        $this->assertSame("<?php return ['edited' => true];\n", file_get_contents($target));
        [$status, $output] = $this->importSupervisor($app, ['files' => $files, '--dry-run' => true]);
        $this->assertSame(0, $status, $output);
        $this->assertStringStartsWith("<?php\n\n// config/drover.php, imported from", $output);
        $this->assertSame("<?php return ['edited' => true];\n", file_get_contents($target));
        [$status, $output] = $this->importSupervisor($app, ['files' => $files, '--force' => true, '--connection' => ['database']]);
        $this->assertSame(0, $status, $output);
        $this->assertSame(['worker-481517'], array_keys(Pools::resolve(require $target, 'production')), '--connection=database');
        $this->assertSame([], glob($this->dir . '/config/.drover.php.import-*'), 'no temporary file left behind');
    }

    /**
     * The paths the import once wrote to and loaded (/tmp/.drover.php.import-PID for --dry-run,
     * config/.drover.php.import-PID otherwise), planted beforehand as another local user could:
     * nothing is written through a symlink, no planted PHP is run (ImportFile; HorizonImporterTest
     * checks the file itself).
     */
    public function testAPathPlantedWhereTheImportOnceWroteIsNeitherFollowedNorRun(): void
    {
        $app = $this->laravelApp();
        $files = glob(self::fixtureDir() . '/*.conf');
        [$victim] = $this->files(['victim.txt' => "precious\n"]);
        $marker = $this->dir . '/the-planted-php-ran';
        $php = "<?php file_put_contents(" . var_export($marker, true) . ", 'ran'); return ['defaults' => [], 'environments' => ['*' => []]];\n";
        $planted = [sys_get_temp_dir() . '/.drover.php.import-' . getmypid(), $this->dir . '/config/.drover.php.import-' . getmypid()];
        try {
            foreach (['a symlink' => fn (string $path) => symlink($victim, $path), 'PHP' => fn (string $path) => file_put_contents($path, $php)] as $kind => $plant) {
                foreach ($planted as $path) {
                    @unlink($path);
                    $plant($path);
                }
                [$status, $output] = $this->importSupervisor($app, ['files' => $files, '--dry-run' => true]);
                $this->assertSame(0, $status, "$kind: $output");
                $this->assertStringContainsString("'worker-481516' => [", $output, $kind);
                [$status, $output] = $this->importSupervisor($app, ['files' => $files, '--force' => true]);
                $this->assertSame(0, $status, "$kind: $output");
                $this->assertSame(['reports', 'imports', 'worker-481516', 'worker-481517'], array_keys(Pools::resolve(require $this->dir . '/config/drover.php', 'production')), $kind);
                $this->assertSame("precious\n", file_get_contents($victim), "$kind: nothing is written through a planted symlink");
                $this->assertFileDoesNotExist($marker, "$kind: planted PHP is not run");
                $this->assertSame([$planted[1]], glob($this->dir . '/config/.drover.php.import-*'), 'no file of its own left behind');
            }
        } finally {
            foreach ($planted as $path) {
                @unlink($path);
            }
        }
    }

    public function testTheCommandNamesBadInputAndWritesNothing(): void
    {
        $app = $this->laravelApp();
        [$bad] = $this->files(['bad.conf' => "[program:w]\ncommand=php /srv/app/artisan queue:work --tries=\"3\n"]);
        [$status, $output] = $this->importSupervisor($app, ['files' => [$bad, $this->dir . '/missing.conf']]);
        $this->assertSame(1, $status);
        $this->assertStringContainsString("{$this->dir}/missing.conf: no such file", $output);
        $this->assertStringContainsString('drover:import-supervisor: nothing written. Fix these in the supervisord files', $output);
        [$status, $output] = $this->importSupervisor($app, ['files' => [$bad]]);
        $this->assertSame(1, $status);
        $this->assertStringContainsString("$bad:2 [program:w] command=php /srv/app/artisan queue:work --tries=\"3: its \" quote is never closed", $output);
        $this->assertFileDoesNotExist($this->dir . '/config/drover.php');
    }
}
