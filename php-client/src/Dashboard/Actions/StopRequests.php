<?php

namespace Drover\Dashboard\Actions;

use Drover\Dashboard\Repositories\StopRequestRepository;
use Illuminate\Database\ConnectionInterface;

/**
 * Asking to stop a running job (`drover.stop_requests`, migration 0014): the request names an
 * attempt (its lease token), so it never stops a later one; the master holding it hears at once
 * (NOTIFY drover_console), kills the worker running it, and settles the job as asked
 * (src/rules/stop_request.rs). Used by the console's Stop — which names the attempt its page
 * showed, and is refused when that one is over — and `drover:stop-job` (`--lease`, `--attempt`).
 * What is asked is checked here; the rows are StopRequestRepository's.
 */
final class StopRequests
{
    public const MODES = ['graceful', 'kill'];

    public const OUTCOMES = ['fail', 'release'];

    private StopRequestRepository $requests;

    public function __construct(ConnectionInterface $db)
    {
        $this->requests = new StopRequestRepository($db);
    }

    /**
     * Asks to stop an attempt of job $id: the one named by $lease (its lease token) or $attempt
     * (its number), each refused unless it is the attempt running now; with neither, the attempt
     * running now. The request names that attempt's lease token, so it stops that attempt or
     * none — never a later one, even should it end as this is written.
     *
     * @return array{token: int, attempt: int} the attempt asked to stop
     * @throws \InvalidArgumentException naming what is wrong: a mode or outcome, a job that is
     *         not running (pending, delayed, waiting, or over), or an attempt that has ended
     */
    public function request(int $id, string $mode, string $outcome, string $by, ?int $lease = null, ?int $attempt = null): array
    {
        if (!in_array($mode, self::MODES, true)) {
            throw new \InvalidArgumentException("mode must be graceful or kill, not $mode");
        }
        if (!in_array($outcome, self::OUTCOMES, true)) {
            throw new \InvalidArgumentException("outcome must be fail or release, not $outcome");
        }
        $named = $lease !== null || $attempt !== null;
        $seen = $lease !== null ? 'the attempt you saw (lease ' . $lease . ($attempt !== null ? ", attempt $attempt" : '') . ')' : "attempt $attempt";
        $row = $this->requests->attempt($id);
        if ($row === null) {
            throw new \InvalidArgumentException(($named ? "$seen has ended; " : '') . "job $id is not in drover.jobs: it is over (completed, failed or deleted), or waits behind its group or a limit" . ($named ? ' — look again' : ''));
        }
        if ($row->lease_token === null) {
            throw new \InvalidArgumentException(($named ? "$seen has ended; " : '') . "job $id is not running: it waits on its queue" . ($named ? ' — look again' : ' (delete it from the search instead)'));
        }
        $token = (int) $row->lease_token;
        $running = (int) $row->attempts;
        if (($lease !== null && $lease !== $token) || ($attempt !== null && $attempt !== $running)) {
            throw new \InvalidArgumentException("$seen has ended; job $id now runs attempt $running (lease $token) — look again");
        }
        // Written only while the attempt named still runs: one that ended meanwhile is refused
        // as above, never turned into a request for the next.
        if (!$this->requests->write($id, $token, $mode, $outcome, $by)) {
            throw new \InvalidArgumentException("job $id's attempt $running (lease $token) ended as it was asked to stop — look again");
        }
        return ['token' => $token, 'attempt' => $running];
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
        $row = $this->requests->progress($id, $token);
        if ($row === null || !$row->running) {
            // Over: stopped as asked when a master took the request, else it ended by itself.
            return ['state' => ($row->taken ?? false) ? 'over' : 'ended', 'host' => $row->hostname ?? null];
        }
        return ['state' => $row->taken ? 'stopped' : 'waiting', 'host' => $row->hostname];
    }
}
