<?php

namespace App\Jobs;

use App\Support\Journal;
use App\Support\Waits;
use Illuminate\Support\Facades\Cache;
use Illuminate\Support\Facades\DB;
use Illuminate\Support\Facades\RateLimiter;

/**
 * Ends a contention once the job it holds back was released: waits (up to 10 s) until the job
 * labelled `$waiter` journaled `processed` on its first attempt, then frees what held it — the
 * WithoutOverlapping lock `$key` (`overlap`, as the job holding it would on finishing) or the
 * rate limiter's count `$key` (`rate_limit`, as the end of its window would). Dispatched after
 * the waiter on the same queue, so the waiter is always taken first: this job never waits for a
 * free worker, only for the waiter's first attempt.
 *
 * On drover a rate limit is decided before the job is handed out (docs/limits.md): the waiter is
 * never released, it waits for its window unclaimed. There this job waits until the waiter is
 * waiting so, then ends the window for both — drover's (`$droverKey`, as its end would) and
 * Laravel's count, which the waiter's own middleware still checks when it runs.
 */
class ContentionEndsJob extends MatrixJob
{
    public function __construct(string $label, public string $waiter, public string $what, public string $key, public ?string $droverKey = null)
    {
        parent::__construct($label);
    }

    protected function run(int $attempt): void
    {
        if ($this->droverKey !== null && $this->job?->getConnectionName() === 'drover') {
            $waiting = Waits::until(fn () => DB::table('drover.limit_waiting')
                ->where('payload', 'like', '%"label":"' . $this->waiter . '"%')->exists());
            RateLimiter::clear($this->key);
            DB::transaction(function () {
                DB::table('drover.limit_keys')->where('key', $this->droverKey)->delete();
                DB::table('drover.limit_wakes')->insert(['key' => $this->droverKey]);
            });
            Journal::record($this->label, $waiting ? 'saw_the_waiter_waiting' : 'waiter_never_waiting', $attempt);
            return;
        }
        $released = Waits::forJournal($this->waiter, 'processed');
        match ($this->what) {
            'overlap' => Cache::lock($this->key)->forceRelease(),
            'rate_limit' => RateLimiter::clear($this->key),
        };
        Journal::record($this->label, $released ? 'saw_the_waiter_released' : 'waiter_never_released', $attempt);
    }
}
