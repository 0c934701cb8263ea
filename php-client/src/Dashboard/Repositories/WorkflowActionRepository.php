<?php

namespace Drover\Dashboard\Repositories;

use Illuminate\Database\ConnectionInterface;

/**
 * What an operator does to a workflow from the console, through the functions migration 0016
 * grants drover_operator (each takes the workflow's lock and moves its graph itself): retry a
 * failed step, cancel a workflow, send it a signal.
 */
final class WorkflowActionRepository
{
    public function __construct(private ConnectionInterface $db)
    {
    }

    /**
     * Failed step $step back into drover.jobs (a fresh attempt count); its node runs again and
     * the nodes its failure cancelled wait for it again (drover.workflow_retry_step). False when
     * the step had not failed, its job is back already, or its workflow was cancelled.
     */
    public function retryStep(int $step): bool
    {
        return (bool) $this->db->selectOne('SELECT drover.workflow_retry_step(?) AS ok', [$step])->ok;
    }

    /**
     * Workflow $id and its sub-workflows cancelled: what has not run is cancelled, what waits in
     * drover.jobs deleted, running steps finish and release nothing (drover.workflow_cancel).
     * False when it had ended.
     */
    public function cancel(int $id): bool
    {
        return (bool) $this->db->selectOne('SELECT drover.workflow_cancel(?) AS ok', [$id])->ok;
    }

    /**
     * Signal $name with $data (JSON text) sent to workflow $id, named by its id
     * (drover.workflow_signal): kept, and its nodes waiting for it released. Returns how many
     * workflows took it (0: it had ended).
     */
    public function signal(int $id, string $name, string $data): int
    {
        return (int) $this->db->selectOne('SELECT drover.workflow_signal(?, ?, ?) AS n', [(string) $id, $name, $data])->n;
    }
}
