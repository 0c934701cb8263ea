<?php

namespace App\Jobs;

use Illuminate\Queue\Middleware\WithoutOverlapping;

/** WithoutOverlapping on `$key`; released for 2 s when the key is taken, tried twice. */
class OverlapJob extends MatrixJob
{
    public $tries = 2;

    public function __construct(string $label, public string $key = 'overlap')
    {
        parent::__construct($label);
    }

    public function middleware()
    {
        return [(new WithoutOverlapping($this->key))->releaseAfter(2)];
    }

    /** The cache lock the middleware takes for this job (Laravel's own key for it). */
    public function lockKey(): string
    {
        return $this->middleware()[0]->getLockKey($this);
    }

    protected function run(int $attempt): void
    {
    }
}
