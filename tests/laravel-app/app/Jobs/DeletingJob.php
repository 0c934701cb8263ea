<?php

namespace App\Jobs;


class DeletingJob extends MatrixJob 
{
    protected function run(int $attempt): void
    {
        $this->delete();
    }
}
