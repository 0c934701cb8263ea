<?php

namespace App\Jobs;

use App\Support\Journal;

/**
 * Journals `handle` when it starts (the base's), naps `$ms` milliseconds, and journals `end`: a
 * job whose start and end the pause tests compare with when a pause returned.
 */
class NapJob extends MatrixJob
{
    public function __construct(string $label, public int $ms = 0)
    {
        parent::__construct($label);
    }

    protected function run(int $attempt): void
    {
        usleep($this->ms * 1000);
        Journal::record($this->label, 'end', $attempt, $this->job?->getConnectionName());
    }
}
