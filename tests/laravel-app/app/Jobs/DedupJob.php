<?php

namespace App\Jobs;

use App\Support\Journal;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;

/** A job deduplicated by its deduplicationId() method (tests/groups.rs); journals `dedup`. */
class DedupJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable;

    public function __construct(public string $key, public string $label)
    {
    }

    public function deduplicationId($payload, $queue): string
    {
        return $this->key;
    }

    public function handle(): void
    {
        Journal::record($this->label, 'dedup', $this->attempts());
    }
}
