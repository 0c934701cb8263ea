<?php

namespace App\Jobs;

use Illuminate\Contracts\Queue\ShouldBeUnique;

class UniqueJob extends MatrixJob implements ShouldBeUnique
{
    public function uniqueId()
    {
        return "the-one";
    }

    protected function run(int $attempt): void
    {
    }
}
