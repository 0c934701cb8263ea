<?php

namespace App\Jobs;


class MaxExceptionsJob extends MatrixJob 
{
    public $tries = 5;

    public $maxExceptions = 2;

    protected function run(int $attempt): void
    {
        throw new \RuntimeException("exception $attempt");
    }
}
