<?php

namespace App\Jobs;

/**
 * A NapJob with three tries: the fleet scenario kills a master with such jobs running, and each
 * must run again elsewhere (not fail on its one try).
 */
class FleetJob extends NapJob
{
    public $tries = 3;
}
