<?php

namespace App\Jobs;

use Drover\Contracts\CompletesInTransaction;

/**
 * EffectJob completed inside its own transaction: the drover worker runs its handler in one
 * transaction on the application's connection and completes the job last in it, fenced by its
 * lease. A worker killed (or frozen, or cut off) before the commit rolls the effect back with
 * the transaction; one killed after it has completed the job: its effect exists once.
 */
class ExactlyOnceEffectJob extends EffectJob implements CompletesInTransaction
{
}
