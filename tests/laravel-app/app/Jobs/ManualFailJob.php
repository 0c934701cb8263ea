<?php

namespace App\Jobs;


class ManualFailJob extends MatrixJob 
{
    public $tries = 3;

    protected function run(int $attempt): void
    {
        $this->fail(new \DomainException("failed by hand"));
    }
}
