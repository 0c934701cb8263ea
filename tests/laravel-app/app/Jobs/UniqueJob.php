<?php

namespace App\Jobs;

use Illuminate\Contracts\Queue\ShouldBeUnique;

/**
 * ShouldBeUnique: the lock is held from dispatch until the job is done, so a second dispatch,
 * before it runs or while it runs (its run dispatches a copy: `$again`), is dropped.
 */
class UniqueJob extends MatrixJob implements ShouldBeUnique
{
    public function __construct(string $label, public bool $again = false)
    {
        parent::__construct($label);
    }

    public function uniqueId()
    {
        return "the-one";
    }

    protected function run(int $attempt): void
    {
        if ($this->again) {
            static::dispatch($this->label)->onConnection($this->job->getConnectionName());
        }
    }
}
