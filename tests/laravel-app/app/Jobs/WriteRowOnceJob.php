<?php

namespace App\Jobs;

use Drover\Contracts\CompletesInTransaction;

/**
 * WriteRowJob completed inside its own transaction (issue 59): the drover worker runs the
 * handler in one transaction on the application's connection, and `drover.complete_within` is
 * its last statement before the COMMIT: the row and the job's completion commit together.
 */
class WriteRowOnceJob extends WriteRowJob implements CompletesInTransaction
{
}
