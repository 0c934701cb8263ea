<?php

namespace App\Providers;

use Illuminate\Support\Facades\DB;
use Illuminate\Support\Facades\Log;
use Illuminate\Support\ServiceProvider;

/**
 * What real applications do at boot that fork mode must survive, switched on by the fork tests:
 * - FIXTURE_BOOT_QUERY=1: a query at boot (settings from the database), so the zygote holds an
 *   open connection before it forks; the backend it used is appended to storage/boot-backends;
 * - FIXTURE_BOOT_LOG=1: a log record at boot, so the zygote has its log file open;
 * - FIXTURE_BOOT_REDIS=1: a Redis command at boot (a cached flag), so the zygote holds a Redis
 *   connection; its client id is appended to storage/boot-redis;
 * - FIXTURE_BOOT_CACHE=1: a read of the database cache store at boot (a cached setting), so the
 *   zygote's cache manager holds a store bound to its database connection;
 * - FIXTURE_ZYGOTE_BOOT_FAILS=1: a boot that fails in the zygote only (DROVER_ZYGOTE=1), as an
 *   application that cannot be forked would;
 * - FIXTURE_BOOT_SOCKET=host:port: a TCP connection opened at boot and kept, as an SDK's client
 *   with a keep-alive connection does, which the zygote's fork-safety check names.
 */
class ForkFixtureServiceProvider extends ServiceProvider
{
    /** @var resource|null the connection FIXTURE_BOOT_SOCKET keeps open */
    private static $bootSocket = null;

    public function boot(): void
    {
        if (env('FIXTURE_ZYGOTE_BOOT_FAILS') && getenv('DROVER_ZYGOTE') === '1') {
            throw new \RuntimeException('this release cannot boot as a zygote (the fork fixture)');
        }
        if (!$this->app->runningInConsole() || !in_array('drover:work', $_SERVER['argv'] ?? [], true)) {
            return;
        }
        if (env('FIXTURE_BOOT_QUERY')) {
            $backend = DB::selectOne('SELECT pg_backend_pid() AS pid')->pid;
            file_put_contents(storage_path('boot-backends'), getmypid() . ' ' . $backend . "\n", FILE_APPEND | LOCK_EX);
        }
        if (env('FIXTURE_BOOT_REDIS')) {
            $client = \Illuminate\Support\Facades\Redis::connection()->client()->client('id');
            file_put_contents(storage_path('boot-redis'), getmypid() . ' ' . $client . "\n", FILE_APPEND | LOCK_EX);
        }
        if (env('FIXTURE_BOOT_CACHE')) {
            \Illuminate\Support\Facades\Cache::store('database')->get('fixture-boot-setting');
        }
        if (env('FIXTURE_BOOT_SOCKET')) {
            self::$bootSocket = stream_socket_client('tcp://' . env('FIXTURE_BOOT_SOCKET'), $errno, $error, 5.0) ?: null;
        }
        if (env('FIXTURE_BOOT_LOG')) {
            Log::info('booted', ['pid' => getmypid()]);
        }
    }
}
