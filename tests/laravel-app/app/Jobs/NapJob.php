<?php

namespace App\Jobs;

use App\Support\Journal;

/**
 * Journals `handle` when it starts (the base's), naps `$ms` milliseconds, and journals `end`: a
 * job whose start and end the pause tests compare with when a pause returned. `$padKiB` makes its
 * payload that much larger.
 */
class NapJob extends MatrixJob
{
    public string $pad;

    public function __construct(string $label, public int $ms = 0, int $padKiB = 0)
    {
        parent::__construct($label);
        $this->pad = str_repeat('x', $padKiB * 1024);
    }

    protected function run(int $attempt): void
    {
        usleep($this->ms * 1000);
        Journal::record($this->label, 'end', $attempt, $this->job?->getConnectionName());
    }
}
