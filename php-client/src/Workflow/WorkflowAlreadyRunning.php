<?php

namespace Drover\Workflow;

/**
 * A workflow declared `->unique()` was dispatched while one of its name had not ended: the
 * database refused it (SQLSTATE DRW01, drover.workflow_create in
 * broker/migrations/0016_workflows.sql), and nothing of this dispatch was written. Inside the
 * application's transaction only the dispatch's own savepoint rolled back: the transaction goes on.
 */
final class WorkflowAlreadyRunning extends \RuntimeException
{
    /** The SQLSTATE drover.workflow_create raises for a unique name already running. */
    public const SQLSTATE = 'DRW01';

    public function __construct(public readonly string $workflow, ?\Throwable $previous = null)
    {
        parent::__construct(
            "drover: workflow \"$workflow\" is already running and its name is unique (->unique()); dispatch it again once it has ended, or cancel the running one",
            0,
            $previous,
        );
    }
}
