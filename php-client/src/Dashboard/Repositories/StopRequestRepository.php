<?php

namespace Drover\Dashboard\Repositories;

use Illuminate\Database\ConnectionInterface;

/**
 * Requests to stop a running job (`drover.stop_requests`, migration 0014), one per job, each
 * naming the attempt it stops by that attempt's lease token: the attempt a job runs now, the
 * request written while that attempt still runs, and how far a master got with it (it takes the
 * request, kills the worker and settles the job: broker/queries/stop_requests.sql). What may be
 * asked is Dashboard\Actions\StopRequests'.
 */
final class StopRequestRepository
{
    public function __construct(private ConnectionInterface $db)
    {
    }

    /** Job $id's lease token (null: not running) and attempts, or null when it is not in drover.jobs. */
    public function attempt(int $id): ?object
    {
        return $this->db->selectOne('SELECT lease_token, attempts FROM drover.jobs WHERE id = ?', [$id]);
    }

    /**
     * Asks to stop job $id's attempt $token ($mode, then $outcome, asked by $by), replacing an
     * earlier request for the job — written only while that attempt still runs. False when it
     * no longer did (nothing written).
     */
    public function write(int $id, int $token, string $mode, string $outcome, string $by): bool
    {
        $written = $this->db->select(
            'INSERT INTO drover.stop_requests (job, lease_token, mode, outcome, requested_by)
             SELECT id, lease_token, ?, ?, ? FROM drover.jobs WHERE id = ? AND lease_token = ?
             ON CONFLICT (job) DO UPDATE SET lease_token = excluded.lease_token, mode = excluded.mode,
                 outcome = excluded.outcome, requested_by = excluded.requested_by, requested_at = now(),
                 taken_by = NULL, taken_at = NULL
             RETURNING job',
            [$mode, $outcome, mb_substr($by, 0, 300), $id, $token]
        );
        return $written !== [];
    }

    /**
     * The request for job $id's attempt $token as a master left it: `taken` (a master acted on
     * it), that master's `hostname`, and whether the attempt still `running`; null when there is
     * no such request.
     */
    public function progress(int $id, int $token): ?object
    {
        return $this->db->selectOne(
            'SELECT r.taken_at IS NOT NULL AS taken, n.hostname,
                    EXISTS (SELECT 1 FROM drover.jobs j WHERE j.id = r.job AND j.lease_token = r.lease_token) AS running
             FROM drover.stop_requests r LEFT JOIN drover.nodes n ON n.id = r.taken_by
             WHERE r.job = ? AND r.lease_token = ?',
            [$id, $token]
        );
    }

    /** The request for job $id, if any, with the host of the master that took it (`taken_on`), for its page. */
    public function find(int $id): ?object
    {
        return $this->db->selectOne(
            'SELECT r.*, n.hostname AS taken_on FROM drover.stop_requests r LEFT JOIN drover.nodes n ON n.id = r.taken_by WHERE r.job = ?',
            [$id]
        );
    }
}
