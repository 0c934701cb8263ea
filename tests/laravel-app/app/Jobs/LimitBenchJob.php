<?php

namespace App\Jobs;

use Drover\Middleware\LimitConcurrency;
use Drover\Middleware\LimitRate;
use Illuminate\Queue\Middleware\RateLimited;
use Illuminate\Queue\Middleware\WithoutOverlapping;
use Illuminate\Support\Facades\Redis;

/**
 * The limits benchmark's job (bench/src/limits.rs): BenchJob's busy wait and record, tried 3
 * times, under Laravel's own middleware by `$mode` — `overlap`: WithoutOverlapping($key) (its
 * default: released at once when the key is held); `rate`: RateLimited('bench_rate') (10 a
 * second); `own_rate`: drover's LimitRate::perSecond(10, $key); `pairs`: drover's
 * LimitConcurrency($key, 2); `funnel`: at most 2 of `$key` at once through Laravel's
 * `Redis::funnel($key)->limit(2)` in handle(), released for 1 s when it finds no slot within
 * its default 3 s (Laravel's documented pattern for the redis engines); `fair`: no middleware,
 * `$key` its fair key (a tenant of a fair queue); `tenant`: no middleware, `$key` only a label
 * (the same jobs on a queue that is not fair); `plain`: none at all.
 */
class LimitBenchJob extends BenchJob
{
    public $tries = 3;

    public $fairKey;

    public function __construct(int $seq, int $ms, public string $mode, public string $key)
    {
        parent::__construct($seq, $ms);
        $this->fairKey = $mode === 'fair' ? $key : null;
    }

    public function middleware(): array
    {
        return match ($this->mode) {
            'overlap' => [new WithoutOverlapping($this->key)],
            'rate' => [new RateLimited('bench_rate')],
            'own_rate' => [LimitRate::perSecond(10, $this->key)],
            'pairs' => [new LimitConcurrency($this->key, 2)],
            default => [],
        };
    }

    public function handle(): void
    {
        if ($this->mode !== 'funnel') {
            parent::handle();
            return;
        }
        Redis::funnel('bench-funnel:' . $this->key)->limit(2)->then(
            fn () => parent::handle(),
            fn () => $this->release(1),
        );
    }
}
