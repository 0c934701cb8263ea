<?php

namespace App\Jobs;

use App\Support\Journal;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;

/**
 * The base of the behaviour matrix: every job has a label and journals each run of handle().
 * Subclasses set Laravel's job properties and say what a run does.
 */
abstract class MatrixJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels;

    public function __construct(public string $label)
    {
    }

    public function handle(): void
    {
        Journal::record($this->label, 'handle', $this->attempts(), $this->job?->getConnectionName());
        $this->run($this->attempts());
    }

    abstract protected function run(int $attempt): void;

    public function failed(\Throwable $e): void
    {
        Journal::record($this->label, 'failed_hook', $this->attempts(), $this->job?->getConnectionName());
    }
}
