<?php

namespace App\Jobs;

use App\Support\Journal;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Support\Facades\DB;

/**
 * A job with an effect: it inserts a row into `effects` on the application's connection, journals
 * `effect` (on the journal's own connection, so it is seen at once), keeps working `$ms`, and
 * journals `end`. A plain job: its insert commits at once, so a worker killed in the `$ms` after
 * it leaves the effect behind and the job's next attempt writes it again (tests/exactly_once.rs).
 * Many tries: the scenario kills its workers again and again.
 */
class EffectJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable;

    public $tries = 50;

    public function __construct(public string $label, public int $ms = 40)
    {
    }

    public function handle(): void
    {
        DB::table('effects')->insert([
            'label' => $this->label,
            'attempt' => $this->attempts(),
            'pid' => getmypid(),
        ]);
        Journal::record($this->label, 'effect', $this->attempts());
        usleep($this->ms * 1000);
        Journal::record($this->label, 'end', $this->attempts());
    }
}
