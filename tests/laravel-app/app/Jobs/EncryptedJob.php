<?php

namespace App\Jobs;

use Illuminate\Contracts\Queue\ShouldBeEncrypted;

class EncryptedJob extends MatrixJob implements ShouldBeEncrypted
{
    protected function run(int $attempt): void
    {
    }
}
