<?php

namespace App\Jobs;

use App\Jobs\Middleware\RateLimitedReleasingSoon;
use Illuminate\Queue\Middleware\RateLimited;

/**
 * RateLimited by the `matrix` limiter (1 per minute): a limited job is dropped (`dontRelease`).
 * With `$releases` it uses the `matrix_release` limiter (1 per minute too) and a limited job is
 * released for 2 s; given a `$then`, its run (past the limiter) dispatches that job, limited and
 * released (on drover: held unclaimed until the window ends), and a ContentionEndsJob that ends
 * the limiter's window once it was.
 */
class RateLimitedJob extends MatrixJob
{
    public $tries = 2;

    /** The cache key Laravel's RateLimited counts `matrix_release` under (md5 of name and key). */
    public const RELEASE_LIMITER_KEY = 'matrix_release';

    public function __construct(string $label, public bool $releases = false, public ?string $then = null)
    {
        parent::__construct($label);
    }

    public function middleware()
    {
        if (!$this->releases) {
            return [(new RateLimited('matrix'))->dontRelease()];
        }
        return [method_exists(RateLimited::class, 'releaseAfter')
            ? (new RateLimited('matrix_release'))->releaseAfter(2)
            : new RateLimitedReleasingSoon('matrix_release')];
    }

    protected function run(int $attempt): void
    {
        if ($this->then !== null) {
            $connection = $this->job->getConnectionName();
            static::dispatch($this->then, true)->onConnection($connection)->onQueue('high');
            ContentionEndsJob::dispatch("{$this->then}_window_ends", $this->then, 'rate_limit', md5(self::RELEASE_LIMITER_KEY), md5(self::RELEASE_LIMITER_KEY) . '@60s')
                ->onConnection($connection)->onQueue('high');
        }
    }
}
