<?php

namespace App\Jobs;

use App\Support\Journal;
use Drover\Jobs\ReportsProgress;
use Drover\Workflow\InteractsWithWorkflow;

/**
 * A workflow's step (tests/workflows.rs): journals `handle` as it starts (the base's), reports
 * half its progress when `$halfway`, records `$result` as its result when one is given, naps
 * `$ms`, and journals `end`: the scenarios compare a step's start with its dependencies' ends.
 */
class WorkflowStepJob extends MatrixJob
{
    use InteractsWithWorkflow, ReportsProgress;

    public function __construct(string $label, public mixed $result = null, public int $ms = 0, public bool $halfway = false)
    {
        parent::__construct($label);
    }

    protected function run(int $attempt): void
    {
        if ($this->halfway) {
            $this->progress(50, 'half');
        }
        if ($this->result !== null) {
            $this->recordResult($this->result);
        }
        usleep($this->ms * 1000);
        Journal::record($this->label, 'end', $attempt);
    }
}
