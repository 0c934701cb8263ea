<?php

namespace App\Jobs;

/**
 * A job that hangs on a dead API (tests/stop_job.rs): naps as NapJob does, with three tries, so
 * a stopped attempt released to run again has attempts left.
 */
class HungApiJob extends NapJob
{
    public $tries = 3;
}
