<?php

namespace App\Console\Commands;

use App\Jobs;
use Illuminate\Console\Command;
use Illuminate\Support\Carbon;
use Illuminate\Support\Facades\Bus;
use Illuminate\Support\Facades\Cache;
use Illuminate\Support\Facades\Crypt;
use Illuminate\Support\Facades\DB;
use Illuminate\Support\Facades\Queue;
use Illuminate\Support\Facades\Redis;

/**
 * Dispatches the same probes to Laravel's database and redis drivers and to drover, each probe to
 * a queue of its own, with the clock frozen (so createdAt, retryUntil and delays are the same for
 * all three), and prints what each driver stored as JSON: per driver, per probe, the payloads as
 * written (`payload`), an encrypted command decrypted (`decrypted`), and the seconds the row or
 * entry waits before it is due (`due_in`). Nothing is run. tests/laravel.rs compares them.
 */
class CapturePayloads extends Command
{
    protected $signature = 'payloads:capture';

    protected $description = 'Capture the payloads the database, redis and drover drivers write';

    private const DRIVERS = ['database', 'redis', 'drover'];

    public function handle(): int
    {
        $now = Carbon::now()->startOfSecond();
        Carbon::setTestNow($now);
        $at = $now->copy()->addSeconds(30);
        Redis::connection()->flushdb();
        $out = [];
        foreach (self::DRIVERS as $driver) {
            config(['queue.default' => $driver]);
            // A unique job's lock would drop the next driver's dispatch.
            Cache::flush();
            $this->probes($driver, $at);
            $out[$driver] = $this->stored($driver, $now);
        }
        $this->line(json_encode($out, JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES));
        return 0;
    }

    /** The probes, each on the queue `probe_NAME`. */
    private function probes(string $driver, Carbon $at): void
    {
        $q = fn (string $name) => "probe_$name";
        Jobs\OkJob::dispatch('plain')->onQueue($q('plain'));
        Jobs\OkJob::dispatch('delayed')->delay(2)->onQueue($q('delayed'));
        Jobs\OkJob::dispatch('delayed_date')->delay($at)->onQueue($q('delayed_date'));
        Jobs\OkJob::dispatch('delayed_zero')->delay(0)->onQueue($q('delayed_zero'));
        Jobs\PayloadOptionsJob::dispatch('options')->onQueue($q('options'));
        Jobs\PayloadMethodsJob::dispatch('methods')->onQueue($q('methods'));
        Jobs\EncryptedJob::dispatch('encrypted')->onQueue($q('encrypted'));
        Jobs\UniqueJob::dispatch('unique')->onQueue($q('unique'));
        Jobs\TaggedJob::dispatch('tagged')->onQueue($q('tagged'));
        Jobs\GroupJob::dispatch('g1', 'grouped')->onQueue($q('grouped'));
        dispatch(function () {
        })->onQueue($q('closure'));
        Bus::chain([new Jobs\OkJob('chain_1'), new Jobs\OkJob('chain_2')])->onQueue($q('chain'))->dispatch();
        Bus::batch([new Jobs\BatchedJob('batch'), (new Jobs\BatchedJob('batch_delayed'))->delay(2)])
            ->name("probe $driver")->onQueue($q('batch'))->dispatch();
        Queue::connection($driver)->bulk([new Jobs\OkJob('bulk'), (new Jobs\OkJob('bulk_delayed'))->delay(2)], '', $q('bulk'));
        Queue::connection($driver)->push('App\Handlers\Probe@handle', ['a' => 1], $q('string'));
        Queue::connection($driver)->pushRaw('{"job":"raw","data":[]}', $q('raw'));
    }

    /** @return array<string, list<array{payload: string, decrypted: ?string, due_in: int}>> */
    private function stored(string $driver, Carbon $now): array
    {
        $entries = match ($driver) {
            'database' => array_map(fn ($r) => [$r->queue, $r->payload, (int) $r->available_at - (int) $r->created_at],
                DB::table('jobs')->where('queue', 'like', 'probe_%')->orderBy('id')->get()->all()),
            'drover' => array_map(fn ($r) => [$r->queue, $r->payload, (int) $r->due_in],
                DB::select("SELECT queue, payload, round(extract(epoch FROM available_at - created_at))::int AS due_in FROM drover.jobs WHERE queue LIKE 'probe_%' ORDER BY id")),
            'redis' => $this->redisEntries($now),
        };
        $stored = [];
        foreach ($entries as [$queue, $payload, $dueIn]) {
            $command = json_decode($payload, true)['data']['command'] ?? null;
            $decrypted = null;
            if (is_string($command) && !str_starts_with($command, 'O:')) {
                try {
                    $decrypted = Crypt::decrypt($command);
                } catch (\Throwable) {
                }
            }
            $stored[substr($queue, strlen('probe_'))][] = ['payload' => $payload, 'decrypted' => $decrypted, 'due_in' => $dueIn];
        }
        ksort($stored);
        return $stored;
    }

    /** @return list<array{0: string, 1: string, 2: int}> */
    private function redisEntries(Carbon $now): array
    {
        $redis = Redis::connection();
        $prefix = config('database.redis.options.prefix', '');
        $entries = [];
        foreach ($redis->keys('queues:probe_*') as $key) {
            $key = substr($key, strlen($prefix));
            if (str_ends_with($key, ':notify')) {
                continue;
            }
            $queue = substr(preg_replace('/:delayed$/', '', $key), strlen('queues:'));
            if (str_ends_with($key, ':delayed')) {
                foreach ($redis->zrangebyscore($key, '-inf', '+inf', ['withscores' => true]) as $payload => $score) {
                    $entries[] = [$queue, $payload, (int) $score - $now->getTimestamp()];
                }
            } else {
                foreach ($redis->lrange($key, 0, -1) as $payload) {
                    $entries[] = [$queue, $payload, 0];
                }
            }
        }
        return $entries;
    }
}
