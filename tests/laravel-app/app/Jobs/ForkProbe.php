<?php

namespace App\Jobs;

use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Support\Facades\DB;
use Illuminate\Support\Facades\Log;
use Illuminate\Support\Str;

/**
 * Records what a worker process is made of for the fork tests: its PID and parent, the database
 * backend and (FIXTURE_BOOT_REDIS) the Redis client it talks to, (FIXTURE_BOOT_CACHE) the backend
 * its database cache store talks to, and one draw of every source of randomness PHP and Laravel use.
 */
class ForkProbe implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable;

    public function __construct(public int $seq, public int $ms = 50)
    {
    }

    public function handle(): void
    {
        $backend = DB::selectOne('SELECT pg_backend_pid() AS pid')->pid;
        $redis = env('FIXTURE_BOOT_REDIS') ? \Illuminate\Support\Facades\Redis::connection()->client()->client('id') : null;
        [$cacheBackend, $after] = [null, null];
        if (env('FIXTURE_BOOT_CACHE')) {
            // The store must talk through this worker's own connection, and using it must leave
            // that connection as it was.
            $store = \Illuminate\Support\Facades\Cache::store('database');
            $store->put("probe-{$this->seq}", getmypid(), 60);
            $cacheBackend = $store->getStore()->getConnection()->selectOne('SELECT pg_backend_pid() AS pid')->pid;
            $after = DB::selectOne('SELECT pg_backend_pid() AS pid')->pid;
        }
        DB::insert(
            'INSERT INTO fork_probes (seq, pid, ppid, backend, mt_rand, random_int, lcg, uniqid, str_random, redis_client, cache_backend, backend_after) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
            [$this->seq, getmypid(), posix_getppid(), $backend, mt_rand(), random_int(0, PHP_INT_MAX), (string) lcg_value(), uniqid('', true), Str::random(32), $redis, $cacheBackend, $after],
        );
        if (env('FIXTURE_BOOT_LOG')) {
            Log::info("probe {$this->seq}", ['pid' => getmypid()]);
        }
        usleep($this->ms * 1000);
    }
}
