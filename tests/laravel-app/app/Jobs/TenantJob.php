<?php

namespace App\Jobs;

use App\Support\Journal;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;

/**
 * A tenant's job on the fair `tenants` queue (tests/limits.rs): its `$fairKey` is the tenant; it
 * journals `fair_start`, labelled `<tenant>:<seq>`, and works `$millis` ms.
 */
class TenantJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels;

    public $fairKey;

    public function __construct(public string $tenant, public string $label, public int $millis = 10)
    {
        $this->fairKey = $tenant;
        $this->onQueue('tenants');
    }

    public function handle(): void
    {
        Journal::record($this->label, 'fair_start', $this->attempts());
        usleep($this->millis * 1000);
    }
}
