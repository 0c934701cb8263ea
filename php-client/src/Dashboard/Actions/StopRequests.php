<?php

namespace Drover\Dashboard\Actions;

use Illuminate\Database\ConnectionInterface;

/**
 * Asking to stop a running job (`drover.stop_requests`, migration 0014): the request names the
 * attempt running now (its lease token), so it never stops a later one; the master holding it
 * hears at once (NOTIFY drover_console), kills the worker running it, and settles the job as asked
 * (src/rules/stop_request.rs). Used by the console's Stop and `drover:stop-job`.
 */
final class StopRequests
{
    public const MODES = ['graceful', 'kill'];

    public const OUTCOMES = ['fail', 'release'];

    public function __construct(private ConnectionInterface $db)
    {
    }

    /**
     * Asks to stop job $id's running attempt. Returns the attempt's lease token.
     *
     * @throws \InvalidArgumentException naming what is wrong: a mode or outcome, or a job that
     *         is not running (pending, delayed, waiting, or over)
     */
    public function request(int $id, string $mode, string $outcome, string $by): int
    {
        if (!in_array($mode, self::MODES, true)) {
            throw new \InvalidArgumentException("mode must be graceful or kill, not $mode");
        }
        if (!in_array($outcome, self::OUTCOMES, true)) {
            throw new \InvalidArgumentException("outcome must be fail or release, not $outcome");
        }
        $row = $this->db->selectOne('SELECT lease_token FROM drover.jobs WHERE id = ?', [$id]);
        if ($row === null) {
            throw new \InvalidArgumentException("job $id is not in drover.jobs: it is over (completed, failed or deleted), or waits behind its group or a limit");
        }
        if ($row->lease_token === null) {
            throw new \InvalidArgumentException("job $id is not running: it waits on its queue (delete it from the search instead)");
        }
        $token = (int) $row->lease_token;
        $this->db->insert(
            'INSERT INTO drover.stop_requests (job, lease_token, mode, outcome, requested_by) VALUES (?, ?, ?, ?, ?)
             ON CONFLICT (job) DO UPDATE SET lease_token = excluded.lease_token, mode = excluded.mode,
                 outcome = excluded.outcome, requested_by = excluded.requested_by, requested_at = now(),
                 taken_by = NULL, taken_at = NULL',
            [$id, $token, $mode, $outcome, mb_substr($by, 0, 300)]
        );
        return $token;
    }

    /**
     * Where the request for job $id's attempt $token is: `waiting` (no master has acted yet),
     * `stopped` (its master killed the worker; the job is being settled), `over` (stopped and
     * settled as asked), or `ended` (the attempt ended by itself before any master acted); with
     * the master's host when known.
     *
     * @return array{state: string, host: ?string}
     */
    public function progress(int $id, int $token): array
    {
        $row = $this->db->selectOne(
            'SELECT r.taken_at IS NOT NULL AS taken, n.hostname,
                    EXISTS (SELECT 1 FROM drover.jobs j WHERE j.id = r.job AND j.lease_token = r.lease_token) AS running
             FROM drover.stop_requests r LEFT JOIN drover.nodes n ON n.id = r.taken_by
             WHERE r.job = ? AND r.lease_token = ?',
            [$id, $token]
        );
        if ($row === null || !$row->running) {
            // Over: stopped as asked when a master took the request, else it ended by itself.
            return ['state' => ($row->taken ?? false) ? 'over' : 'ended', 'host' => $row->hostname ?? null];
        }
        return ['state' => $row->taken ? 'stopped' : 'waiting', 'host' => $row->hostname];
    }

    /** The request for job $id, if any (for its page). */
    public function find(int $id): ?object
    {
        return $this->db->selectOne(
            'SELECT r.*, n.hostname AS taken_on FROM drover.stop_requests r LEFT JOIN drover.nodes n ON n.id = r.taken_by WHERE r.job = ?',
            [$id]
        );
    }
}
