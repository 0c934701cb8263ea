<?php

namespace Drover\Tests;

use Illuminate\Config\Repository;
use Illuminate\Foundation\Application;
use Illuminate\Http\Request;
use Illuminate\Support\Facades\Facade;
use Illuminate\Support\Facades\Gate;
use Symfony\Component\HttpFoundation\Response;

/**
 * A Laravel application that serves the dashboard from the test PostgreSQL (PostgresServer),
 * built in the test process on whichever Laravel the run is for (8.83 or 12): the package's own
 * service provider, routes, controllers and views, requests handled by Laravel's HTTP kernel —
 * what a browser would be sent, without a server or a browser. Jobs are pushed through a real
 * `drover` queue connection (real payloads); bulk actions run on the `sync` connection, in the
 * request that confirms them.
 *
 * In `production`: `viewDrover` lets everyone look; `operateDrover` lets act whoever
 * DashboardApp::$operator says (a viewer when false). No session or CSRF middleware: the pages'
 * gates and checks are the package's own.
 */
final class DashboardApp
{
    /** Whether the next requests come from an operator (operateDrover allows) or a viewer. */
    public static bool $operator = false;

    private function __construct(public readonly Application $app, private DashboardKernel $kernel)
    {
    }

    public static function boot(): self
    {
        $server = PostgresServer::get();
        $base = sys_get_temp_dir() . '/drover-dashboard-app-' . getmypid();
        @mkdir("$base/storage/views", 0755, true);
        register_shutdown_function(fn () => exec('rm -rf ' . escapeshellarg($base)));
        $app = new Application($base);
        $app->useStoragePath("$base/storage");
        $app->instance('config', new Repository([
            'app' => [
                'name' => 'drover-dashboard-test', 'env' => 'production', 'debug' => true, 'url' => 'http://localhost',
                'timezone' => 'UTC', 'locale' => 'en', 'fallback_locale' => 'en', 'cipher' => 'AES-256-CBC',
                'key' => 'base64:9wLMy0Lq0Qe6nW2wvp2vAz2yv0oQw3b+gHbd4Xl8iZs=', 'providers' => [],
            ],
            'database' => [
                'default' => 'pgsql',
                'connections' => ['pgsql' => [
                    'driver' => 'pgsql', 'host' => $server->socketDir(), 'database' => 'drover', 'username' => 'drover',
                    'password' => '', 'charset' => 'utf8', 'prefix' => '', 'schema' => 'public', 'search_path' => 'public',
                ]],
            ],
            'queue' => [
                'default' => 'sync',
                'connections' => [
                    'sync' => ['driver' => 'sync'],
                    'drover' => ['driver' => 'drover', 'connection' => 'pgsql', 'queue' => 'default'],
                ],
                'failed' => ['driver' => 'database-uuids', 'database' => 'pgsql', 'table' => 'failed_jobs'],
            ],
            'view' => ['paths' => [], 'compiled' => "$base/storage/views"],
            'cache' => ['default' => 'array', 'stores' => ['array' => ['driver' => 'array']], 'prefix' => 'drover_test'],
            'session' => ['driver' => 'array', 'lifetime' => 120, 'expire_on_close' => false, 'encrypt' => false, 'cookie' => 'drover_test', 'path' => '/', 'domain' => null, 'secure' => false, 'http_only' => true, 'same_site' => 'lax', 'lottery' => [2, 100]],
            'auth' => [
                'defaults' => ['guard' => 'web', 'passwords' => 'users'],
                'guards' => ['web' => ['driver' => 'session', 'provider' => 'users']],
                'providers' => ['users' => ['driver' => 'eloquent', 'model' => \Illuminate\Foundation\Auth\User::class]],
            ],
            'logging' => ['default' => 'null', 'channels' => ['null' => ['driver' => 'monolog', 'handler' => \Monolog\Handler\NullHandler::class]]],
            'drover' => [
                'database' => 'pgsql',
                'dashboard' => [
                    'enabled' => true, 'path' => 'drover', 'middleware' => [], 'refresh' => 0,
                    'actions' => ['connection' => 'sync'],
                    // An older config's exact names: the default patterns still apply beside them.
                    'redact' => ['password', 'card_number'],
                ],
            ],
        ]));
        $app->detectEnvironment(fn () => 'production');
        foreach ([
            \Illuminate\Filesystem\FilesystemServiceProvider::class,
            \Illuminate\Cache\CacheServiceProvider::class,
            \Illuminate\View\ViewServiceProvider::class,
            \Illuminate\Database\DatabaseServiceProvider::class,
            \Illuminate\Encryption\EncryptionServiceProvider::class,
            \Illuminate\Bus\BusServiceProvider::class,
            \Illuminate\Queue\QueueServiceProvider::class,
            \Illuminate\Session\SessionServiceProvider::class,
            \Illuminate\Cookie\CookieServiceProvider::class,
            \Illuminate\Auth\AuthServiceProvider::class,
            \Illuminate\Hashing\HashServiceProvider::class,
            \Illuminate\Translation\TranslationServiceProvider::class,
            \Drover\DroverServiceProvider::class,
        ] as $provider) {
            $app->register($provider);
        }
        $app->singleton(\Illuminate\Contracts\Debug\ExceptionHandler::class, \Illuminate\Foundation\Exceptions\Handler::class);
        // The schedule page reads the application's schedule through the console kernel: an
        // empty schedule, the runs in drover.schedule_runs.
        $app->singleton(\Illuminate\Contracts\Console\Kernel::class, fn ($app) => new DashboardConsoleKernel($app, $app['events']));
        $app->singleton(\Illuminate\Console\Scheduling\Schedule::class, fn () => new \Illuminate\Console\Scheduling\Schedule('UTC'));
        Facade::clearResolvedInstances();
        Facade::setFacadeApplication($app);
        \Illuminate\Container\Container::setInstance($app);
        $app->boot();
        Gate::define('viewDrover', fn ($user = null) => true);
        Gate::define('operateDrover', fn ($user = null) => self::$operator);
        return new self($app, new DashboardKernel($app, $app['router']));
    }

    /** A request through the HTTP kernel, as a viewer or an operator. */
    public function request(string $method, string $uri, array $parameters = [], bool $operator = false): Response
    {
        self::$operator = $operator;
        return $this->kernel->handle(Request::create($uri, $method, $parameters));
    }

    /** GET a page; its body (failing the test with the answer when it is not $status). */
    public function page(string $uri, bool $operator = false, int $status = 200): string
    {
        $response = $this->request('GET', $uri, [], $operator);
        $body = (string) $response->getContent();
        \PHPUnit\Framework\Assert::assertSame($status, $response->getStatusCode(), "GET $uri: " . self::why($response));
        return $body;
    }

    /** What an error answer says: the exception's message, or the start of the body. */
    public static function why(Response $response): string
    {
        $exception = $response->exception ?? null;
        return $exception instanceof \Throwable ? $exception->getMessage() : mb_substr((string) $response->getContent(), 0, 2000);
    }
}

/** Laravel's console kernel without its bootstrappers (DashboardApp configured the application). */
final class DashboardConsoleKernel extends \Illuminate\Foundation\Console\Kernel
{
    protected $bootstrappers = [];
}

/** Laravel's HTTP kernel without its bootstrappers (DashboardApp configured and booted the application) or global middleware. */
final class DashboardKernel extends \Illuminate\Foundation\Http\Kernel
{
    protected $bootstrappers = [];

    protected $middleware = [];
}
