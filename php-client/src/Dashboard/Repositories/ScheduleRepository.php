<?php

namespace Drover\Dashboard\Repositories;

use Illuminate\Database\ConnectionInterface;

/**
 * What the dashboard reads and changes of the schedule (docs/schedule.md) in
 * `drover.schedule_runs` and `drover.schedule_pauses`: each task's latest run, the recent runs
 * with their output, and the two actions — pause / resume a task (every master records its due
 * times as skipped meanwhile) and run a task now (a `requested` row the first master that runs
 * the task takes).
 */
final class ScheduleRepository
{
    /** Recent runs listed. */
    public const RECENT = 50;

    public function __construct(private ConnectionInterface $db)
    {
    }

    /**
     * Each task's latest run and whether it is paused, by key.
     *
     * @param list<string> $keys
     * @return array<string, object{latest: ?object, paused: ?object}>
     */
    public function state(array $keys): array
    {
        if ($keys === []) {
            return [];
        }
        $array = '{' . implode(',', array_map(fn ($k) => '"' . addcslashes($k, '"\\') . '"', $keys)) . '}';
        // Each task's newest row through the unique index (task, due_at, scope), not a sort of
        // every task's history.
        $latest = $this->db->select(
            'SELECT t.task, l.status, l.due_at, l.ended_at, l.reason, l.host, l.exit_code
               FROM unnest(?::text[]) AS t (task)
               JOIN LATERAL (SELECT r.status, r.due_at, r.ended_at, r.reason, r.host, r.exit_code
                               FROM drover.schedule_runs r WHERE r.task = t.task
                              ORDER BY r.due_at DESC LIMIT 1) AS l ON true',
            [$array],
        );
        $paused = $this->db->select(
            'SELECT task, paused_at, paused_by FROM drover.schedule_pauses WHERE task = ANY (?::text[])',
            [$array],
        );
        $state = [];
        foreach ($keys as $key) {
            $state[$key] = (object) ['latest' => null, 'paused' => null];
        }
        foreach ($latest as $row) {
            $state[$row->task]->latest = \Drover\Dashboard\Redaction::fromConfig()->row($row);
        }
        foreach ($paused as $row) {
            $state[$row->task]->paused = $row;
        }
        return $state;
    }

    /** @return list<object> the latest runs of every task, newest due first, with their output's tail */
    public function recent(): array
    {
        $rows = $this->db->select(
            'SELECT id, task, summary, due_at, host, status, reason, asked_by, started_at, ended_at, exit_code, output_tail
               FROM drover.schedule_runs ORDER BY due_at DESC, id DESC LIMIT ?',
            [self::RECENT],
        );
        // Its output, reason and command line as a page may show them.
        return array_map(fn (object $row) => \Drover\Dashboard\Redaction::fromConfig()->row($row), $rows);
    }

    /** Pauses the task: its due times are skipped on every master until it is resumed. */
    public function pause(string $key, string $summary, string $by): void
    {
        $this->db->insert(
            'INSERT INTO drover.schedule_pauses (task, summary, paused_by) VALUES (?, ?, ?) ON CONFLICT (task) DO NOTHING',
            [$key, $summary, $by],
        );
    }

    /** Resumes the task; false if it was not paused. */
    public function resume(string $key): bool
    {
        return $this->db->delete('DELETE FROM drover.schedule_pauses WHERE task = ?', [$key]) > 0;
    }

    /**
     * Asks for a run of the task now: once across the fleet, by the first master that runs the
     * task (within a few seconds), paused or not.
     */
    public function runNow(string $key, string $summary, string $by): void
    {
        $this->db->insert(
            "INSERT INTO drover.schedule_runs (task, summary, due_at, scope, host, status, asked_by)
             VALUES (?, ?, clock_timestamp(), '', ?, 'requested', ?)",
            [$key, $summary, (string) gethostname(), $by],
        );
    }
}
