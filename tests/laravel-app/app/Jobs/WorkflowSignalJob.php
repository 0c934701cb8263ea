<?php

namespace App\Jobs;

use App\Support\Journal;
use Drover\Workflow\InteractsWithWorkflow;

/**
 * A workflow's step released by signal `$signal` (tests/workflows.rs): records the signal's data
 * as its result; journals `handle` and `end`.
 */
class WorkflowSignalJob extends MatrixJob
{
    use InteractsWithWorkflow;

    public function __construct(string $label, public string $signal)
    {
        parent::__construct($label);
    }

    protected function run(int $attempt): void
    {
        $this->recordResult($this->workflow()->signal($this->signal));
        Journal::record($this->label, 'end', $attempt);
    }
}
