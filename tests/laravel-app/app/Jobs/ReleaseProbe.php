<?php

namespace App\Jobs;

use App\Support\Journal;

/**
 * Journals which release's code runs it: the release directory the worker's application booted
 * from (`base_path()`, which PHP resolves through a `current` symlink when it boots), as the
 * event `release:NAME`.
 */
class ReleaseProbe extends MatrixJob
{
    protected function run(int $attempt): void
    {
        Journal::record($this->label, 'release:' . basename(base_path()), $attempt);
    }
}
