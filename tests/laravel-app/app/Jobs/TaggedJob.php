<?php

namespace App\Jobs;

/** A job with its own tags, for the dashboard's tag search. */
class TaggedJob extends MatrixJob
{
    /** @return list<string> */
    public function tags(): array
    {
        return ['customer:42', 'invoices'];
    }

    protected function run(int $attempt): void
    {
    }
}
