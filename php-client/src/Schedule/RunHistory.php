<?php

namespace Drover\Schedule;

use Drover\Config\Embedded;
use Illuminate\Contracts\Foundation\Application;
use Illuminate\Database\ConnectionInterface;

/**
 * The schedule's history as the package reads and writes it beside the masters
 * (`drover.schedule_runs`, migration 0012; docs/schedule.md, "Beside cron"): whether drover ran a
 * task earlier in a minute, and the runs of Laravel's own scheduler (a cron `schedule:run` or
 * `schedule:work` still running during a cutover), recorded with scope `laravel:HOST` so the
 * masters can say that it runs, and what it ran; and, for Laravel's scheduler, whether drover
 * runs the schedule too (WarnOfASecondScheduler).
 */
final class RunHistory
{
    /** The scope of a run of Laravel's own scheduler on $host: never a master's ('' or a host). */
    public const LARAVEL_SCOPE_PREFIX = 'laravel:';

    public function __construct(private ConnectionInterface $db)
    {
    }

    /** On drover's database connection (the embedded one when the application uses it). */
    public static function of(Application $app): self
    {
        return new self($app['db']->connection(Embedded::connectionName($app, config('drover.database') ?: null)));
    }

    /**
     * Whether a master ran task $key (of onOneServer) at an earlier due time of the minute of $due
     * (Unix seconds) — and so took Laravel's mutex for that minute: a sub-minute task's later
     * runs of the minute find it taken by drover, not by Laravel's scheduler.
     */
    public function droverRanEarlierInMinute(string $key, int $due): bool
    {
        $row = $this->db->selectOne(
            "SELECT EXISTS (
                 SELECT 1 FROM drover.schedule_runs
                  WHERE task = ? AND scope = ''
                    AND due_at >= date_trunc('minute', to_timestamp(?)) AND due_at < to_timestamp(?)
                    AND status IN ('running', 'succeeded', 'failed', 'started')
             ) AS ran",
            [$key, $due, $due]
        );
        return (bool) ($row->ran ?? false);
    }

    /**
     * How many hosts drover masters ran this schedule on in the last three minutes: runs due
     * then, the masters' own (not asked for by hand), missed ones left out. 0 when drover does
     * not run it.
     */
    public function droverHostsInLastThreeMinutes(): int
    {
        $recent = $this->db->selectOne(
            "SELECT count(DISTINCT host) AS hosts FROM drover.schedule_runs
                  WHERE due_at > now() - interval '3 minutes' AND asked_by IS NULL AND status <> 'missed'"
        );
        return (int) ($recent->hosts ?? 0);
    }

    /**
     * A run of Laravel's own scheduler: task $key ($summary), due at $dueAt (Unix seconds), on
     * $host, by $how (`schedule:run`, `schedule:work`), ended so ($status: succeeded or failed).
     * Once per task, due time and host.
     */
    public function recordLaravelRun(string $key, string $summary, int $dueAt, string $host, string $how, string $status, ?int $exitCode, float $startedAt, float $endedAt): void
    {
        $this->db->insert(
            "INSERT INTO drover.schedule_runs (task, summary, due_at, scope, node, host, status, reason, claimed_at, started_at, ended_at, exit_code)
             VALUES (?, ?, to_timestamp(?), ?, NULL, ?, ?, ?, to_timestamp(?), to_timestamp(?), to_timestamp(?), ?)
             ON CONFLICT (task, due_at, scope) DO NOTHING",
            [
                mb_substr($key, 0, 1000),
                mb_substr($summary, 0, 1000),
                $dueAt,
                self::LARAVEL_SCOPE_PREFIX . $host,
                $host,
                $status,
                "run by Laravel's own scheduler ($how) on $host, not by a drover master: remove it from cron (docs/schedule.md, \"Beside cron\")",
                $startedAt,
                $startedAt,
                $endedAt,
                $exitCode,
            ]
        );
    }
}
