<?php

namespace App\Jobs;

use App\Support\Journal;
use Drover\Workflow\InteractsWithWorkflow;

/**
 * A workflow's fan-in (tests/workflows.rs): reads the results of every step of node `$node`, in
 * member order, and records them with their sum as its own result; journals `handle` and `end`.
 */
class WorkflowFanInJob extends MatrixJob
{
    use InteractsWithWorkflow;

    public function __construct(string $label, public string $node)
    {
        parent::__construct($label);
    }

    protected function run(int $attempt): void
    {
        $results = $this->workflow()->results($this->node);
        $this->recordResult(['sum' => array_sum($results), 'results' => $results]);
        Journal::record($this->label, 'end', $attempt);
    }
}
