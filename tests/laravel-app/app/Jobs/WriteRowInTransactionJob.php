<?php

namespace App\Jobs;

use Illuminate\Support\Facades\DB;

/**
 * WriteRowJob with its INSERT in a transaction of its own (`DB::transaction`), completed as any
 * job is (`done`, an ack by the master): the bench's control that separates what a transaction
 * around the write costs (BEGIN and COMMIT) from what completing within it costs
 * (WriteRowOnceJob: the same transaction, plus `drover.complete_within`).
 */
class WriteRowInTransactionJob extends WriteRowJob
{
    protected function write(): void
    {
        DB::transaction(fn () => parent::write());
    }
}
