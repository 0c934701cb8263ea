<?php

namespace App\Jobs;

use Illuminate\Contracts\Queue\ShouldBeUnique;

/**
 * ShouldBeUnique with $uniqueFor = 2: a second dispatch at once is dropped, but the lock expires
 * (within 2 s: the file store counts whole seconds) even while the job runs, so the copy its run
 * dispatches (`$again`) 2.2 s after the first dispatch is queued and runs; UniqueJob's is dropped.
 */
class UniqueForJob extends MatrixJob implements ShouldBeUnique
{
    public $uniqueFor = 2;

    public float $dispatchedAt;

    public function __construct(string $label, public bool $again = false)
    {
        parent::__construct($label);
        $this->dispatchedAt = microtime(true);
    }

    public function uniqueId()
    {
        return 'unique-for';
    }

    protected function run(int $attempt): void
    {
        if ($this->again) {
            usleep((int) max(0, ($this->dispatchedAt + 2.2 - microtime(true)) * 1_000_000));
            static::dispatch($this->label)->onConnection($this->job->getConnectionName());
        }
    }
}
