<?php

namespace Drover\Workflow;

/**
 * A workflow dispatched (PendingWorkflow::dispatch()): its id in drover.workflows — what the
 * console's page `/drover/workflows/{id}` and Drover::signal() (as digits) take — and its name.
 * It runs once the transaction it was dispatched in commits.
 */
final class DispatchedWorkflow
{
    public function __construct(public readonly int $id, public readonly string $name)
    {
    }
}
