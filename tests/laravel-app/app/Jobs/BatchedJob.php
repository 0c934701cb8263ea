<?php

namespace App\Jobs;

use App\Jobs\Middleware\SkipStandIn;
use Illuminate\Bus\Batchable;
use Illuminate\Queue\Middleware\SkipIfBatchCancelled;
use Illuminate\Support\Facades\DB;

/**
 * A batch's job. Options: `$add` — its run adds a job of that label to its batch
 * (`batch()->add()`); `$skipIfCancelled` — the SkipIfBatchCancelled middleware (Laravel 9+; on
 * Laravel 8 the fixture's line-for-line stand-in); `$failsOnce` — throws on its first run ever
 * (by the journal: a retried job starts again at attempt 1), runs when retried
 * (`queue:retry-batch`).
 */
class BatchedJob extends MatrixJob
{
    use Batchable;

    public function __construct(string $label, public ?string $add = null, public bool $skipIfCancelled = false, public bool $failsOnce = false)
    {
        parent::__construct($label);
    }

    public static function skipIfCancelledInUse(): string
    {
        return class_exists(SkipIfBatchCancelled::class) ? 'uses_laravels_skip_if_batch_cancelled' : 'skip_if_batch_cancelled_absent_on_this_laravel_uses_a_stand_in';
    }

    public function middleware()
    {
        if (!$this->skipIfCancelled) {
            return [];
        }
        return [class_exists(SkipIfBatchCancelled::class) ? new SkipIfBatchCancelled() : new SkipStandIn(ifBatchCancelled: true)];
    }

    protected function run(int $attempt): void
    {
        if ($this->add !== null) {
            $this->batch()->add([new static($this->add)]);
        }
        if ($this->failsOnce && DB::table('journal')->where('label', $this->label)->where('event', 'handle')->count() === 1) {
            throw new \RuntimeException('fails until retried');
        }
    }
}
