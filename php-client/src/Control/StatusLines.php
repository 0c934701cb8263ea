<?php

namespace Drover\Control;

/**
 * What `php artisan drover:status` shows of a master's status document (docs/status.schema.json,
 * src/status_document.rs): a list of entries, each `['line', text]`, `['error', text]` or
 * `['table', headers, rows]`. Pure, so PHPUnit reads the document the Rust types write
 * (tests/fixtures/status.json) through it.
 */
final class StatusLines
{
    /**
     * @param array<string, mixed> $status
     * @return list<array{0: string, 1: mixed, 2?: mixed}>
     */
    public static function of(array $status): array
    {
        $out = [];
        $out[] = ['line', sprintf('drover master pid %d: %s, %s%s%s', $status['pid'], $status['health'] ?? '?', $status['phase'], $status['paused'] ? ', paused' : '', ($status['reloading'] ?? false) ? ', reloading' : '')];
        foreach ($status['problems'] ?? [] as $problem) {
            $out[] = ['error', "DEGRADED: $problem"];
        }
        foreach ($status['paused_queues'] ?? [] as $queue => $left) {
            $out[] = ['line', $left === null
                ? "queue $queue paused until resumed (queue:resume / drover:continue --queue=$queue)"
                : sprintf('queue %s paused for %ds more', $queue, (int) round($left))];
        }
        foreach ($status['queue_budgets'] ?? [] as $queue => $jobs) {
            $out[] = ['line', sprintf('queue %s budget: at most %d jobs at once across the fleet', $queue, $jobs)];
        }
        if (($status['fair_queues'] ?? []) !== []) {
            $out[] = ['line', 'fair queues (their tenants taken in turn): ' . implode(', ', $status['fair_queues'])];
        }
        // The progress the running jobs last reported, by job id, when the answer read it (the
        // control socket's answer; a node row's document has none).
        $progress = is_array($status['progress'] ?? null) && !isset($status['progress']['error']) ? $status['progress'] : null;
        foreach ($status['pools'] as $pool) {
            $circuit = match ($pool['circuit']['state'] ?? 'closed') {
                'open' => sprintf('circuit OPEN after %d failed starts (retry in %ds)', $pool['failures_in_a_row'], (int) $pool['circuit']['retry_in_secs']),
                'half_open' => 'circuit half-open (probing)',
                default => 'circuit closed',
            };
            $spawn = $pool['spawn'] ?? ['mode' => 'exec'];
            $spawn = match (true) {
                isset($spawn['fell_back']) => 'workers started by exec: ' . $spawn['fell_back'],
                ($spawn['mode'] ?? null) === 'fork' => sprintf('workers forked from zygote pid %s (%s)', $spawn['zygote']['pid'] ?? '-', $spawn['zygote']['state'] ?? '?'),
                default => 'workers started by exec',
            };
            $out[] = ['line', sprintf('pool %s (queues %s): %d processes, %d serving, generation %d, %s%s; %s', $pool['name'], implode(',', $pool['queues']), $pool['processes'], $pool['serving'], $pool['generation'], $circuit, !empty($pool['paused']) ? ', PAUSED (drover:continue --pool=' . $pool['name'] . ')' : '', $spawn)];
            if (isset($pool['outage'])) {
                $o = $pool['outage'];
                $out[] = ['line', sprintf("  outage: a running job outlives a database outage of %d-%ds (outage_grace %ds%s); a lost host's jobs come back within %ds", (int) round($o['outlives_secs'][0]), (int) round($o['outlives_secs'][1]), (int) round($o['grace_secs']), ($o['in_force'] ?? true) ? '' : ', not in force while a master of drover 0.1 has a row', (int) round($o['lost_host_return_secs']))];
            }
            $rows = array_map(fn ($w) => [
                $w['id'], $w['pid'], $w['state'], $w['generation'], $w['held'], $w['running'] ?? '-', $w['finished'],
                $w['pss_kib'] === null ? '-' : sprintf('%.1f', $w['pss_kib'] / 1024), $w['uptime_secs'] . 's',
                ...($progress === null ? [] : [isset($w['running'], $progress[$w['running']]) ? self::progressWords($progress[$w['running']]) : '-']),
            ], $pool['workers']);
            $headers = ['worker', 'pid', 'state', 'gen', 'held', 'running', 'finished', 'PSS MiB', 'uptime'];
            $out[] = ['table', $progress === null ? $headers : [...$headers, 'progress'], $rows];
        }
        if (isset($status['progress']['error'])) {
            $out[] = ['line', 'progress of running jobs: could not be read: ' . $status['progress']['error']];
        }
        if (is_array($status['backlog'] ?? null) && !isset($status['backlog']['error'])) {
            $out[] = ['line', 'backlog (jobs waiting): ' . implode(', ', array_map(fn ($q, $n) => "$q $n", array_keys($status['backlog']), $status['backlog']))];
        }
        foreach (self::groupLines($status['groups'] ?? null) as $line) {
            $out[] = ['line', $line];
        }
        foreach (self::limitLines($status['limits'] ?? null) as $line) {
            $out[] = ['line', $line];
        }
        foreach (self::workflowLines($status['workflows'] ?? null) as $line) {
            $out[] = ['line', $line];
        }
        foreach (self::scheduleLines($status['schedule'] ?? null) as $line) {
            $out[] = ['line', $line];
        }
        foreach (self::schedulersBeside($status['schedulers_beside'] ?? null) as $line) {
            $out[] = ['line', $line];
        }
        foreach (self::horizonLines($status['horizon'] ?? null) as $line) {
            $out[] = ['line', $line];
        }
        $t = $status['totals'];
        $out[] = ['line', sprintf('totals: %d claimed, %d done, %d released, %d failed, %d timed out', $t['claimed'], $t['done'], $t['released'], $t['failed'], $t['timed_out'])];
        if (($t['completed_within'] ?? 0) > 0) {
            $out[] = ['line', sprintf('completed within their own transaction: %d of the done (%d learned from the database after their worker died)', $t['completed_within'], $t['completed_after_exit'] ?? 0)];
        }
        return $out;
    }

    /**
     * A running job's progress beside its worker, as `drover status` says it: `41% parsed 4,000
     * rows`, the note cut at 60 characters, and how long ago once that is a minute or more.
     *
     * @param array{percent: int, note?: ?string, reported_secs_ago: float|int} $p
     */
    public static function progressWords(array $p): string
    {
        $out = $p['percent'] . '%';
        $note = trim((string) ($p['note'] ?? ''));
        if ($note !== '') {
            $out .= ' ' . (mb_strlen($note) > 60 ? mb_substr($note, 0, 59) . '…' : $note);
        }
        if ($p['reported_secs_ago'] >= 60) {
            $out .= ' (' . self::durationWords($p['reported_secs_ago']) . ' ago)';
        }
        return $out;
    }

    /**
     * The workflows (docs/workflows.md): one line while any is pending or running or one failed
     * in the last hour, as `drover status` says it.
     *
     * @return list<string>
     */
    private static function workflowLines(mixed $workflows): array
    {
        if (!is_array($workflows)) {
            return [];
        }
        if (isset($workflows['error'])) {
            return ['workflows: could not be read: ' . $workflows['error']];
        }
        if ($workflows['pending'] === 0 && $workflows['running'] === 0 && $workflows['failed_last_hour'] === 0) {
            return [];
        }
        return [sprintf(
            'workflows: %d running, %d pending; nodes waiting: %d for a signal, %d for a time; %d failed in the last hour',
            $workflows['running'],
            $workflows['pending'],
            $workflows['nodes_waiting_for_signal'],
            $workflows['nodes_waiting_for_time'],
            $workflows['failed_last_hour'],
        )];
    }

    /**
     * What holds the database's vacuum horizon back (docs/operations.md, "A held snapshot"): the
     * oldest snapshot's holder, how long it has been open, the dead tuples it keeps.
     *
     * @return list<string>
     */
    private static function horizonLines(mixed $horizon): array
    {
        if (!is_array($horizon)) {
            return [];
        }
        if (isset($horizon['error'])) {
            return ['vacuum horizon: could not be read: ' . $horizon['error']];
        }
        $dead = isset($horizon['jobs_dead_tuples']) ? sprintf('; %d dead tuples in drover.jobs', $horizon['jobs_dead_tuples']) : '';
        $o = $horizon['oldest'] ?? null;
        if (!is_array($o)) {
            $lines = ['vacuum horizon: nothing holds it back' . $dead];
        } else {
            $who = array_values(array_filter([$o['name'], $o['role'] ?? null, $o['state'] ?? null], fn ($v) => $v !== null));
            $lines = [sprintf(
                'vacuum horizon: held by %s%s (%s)%s, %d transactions old%s',
                str_replace('_', ' ', $o['kind']),
                isset($o['pid']) ? ' pid ' . $o['pid'] : '',
                implode(', ', $who),
                isset($o['open_secs']) ? ', open ' . self::durationWords($o['open_secs']) : '',
                $o['xid_age'],
                $dead,
            )];
        }
        if (empty($horizon['sees_all_sessions'])) {
            $lines[] = "  the master's role cannot see other roles' snapshots: GRANT pg_read_all_stats TO it (docs/operations.md)";
        }
        return $lines;
    }

    /**
     * The keys jobs wait for (docs/limits.md), most waited for first: each key's line, the slots
     * held, the rate used and when its window ends, the oldest wait.
     *
     * @return list<string>
     */
    private static function limitLines(mixed $limits): array
    {
        if (!is_array($limits) || isset($limits['error']) || $limits === []) {
            return [];
        }
        $lines = ['limits (keys jobs wait for, most first):'];
        foreach ($limits as $k) {
            $rate = $k['rate_used'] === null ? '' : sprintf(', %d started in its window (ends in %.1fs)', $k['rate_used'], $k['window_ends_in_secs'] ?? 0);
            $lines[] = sprintf('  %s: %d waiting, %d slots held%s, oldest due %.1fs', $k['key'], $k['waiting'], $k['held'], $rate, $k['oldest_wait_secs'] ?? 0);
        }
        return $lines;
    }

    /**
     * The schedule (docs/schedule.md): per task, its expression, when it is next due, its latest
     * run and its failures in a row.
     *
     * @return list<string>
     */
    private static function scheduleLines(mixed $schedule): array
    {
        if (!is_array($schedule)) {
            return [];
        }
        if (isset($schedule['error'])) {
            return ['schedule: its history could not be read: ' . $schedule['error']];
        }
        $lines = [sprintf('schedule: %d task(s)', count($schedule))];
        foreach ($schedule as $t) {
            $next = $t['next_due_in_secs'] === null ? 'never due again' : 'next in ' . self::durationWords($t['next_due_in_secs']);
            $latest = $t['latest'] === null ? 'never run' : sprintf(
                'last %s (due %s, %s)%s',
                $t['latest']['status'],
                $t['latest']['due_at'],
                $t['latest']['host'],
                $t['latest']['reason'] === null ? '' : ': ' . $t['latest']['reason'],
            );
            $lines[] = sprintf(
                '  %s [%s %s%s%s] %s; %s%s',
                $t['summary'],
                $t['expression'],
                $t['timezone'],
                $t['repeat_seconds'] === null ? '' : " every {$t['repeat_seconds']}s",
                $t['one_server'] ? ', one server' : '',
                $next,
                $latest,
                $t['failed_in_a_row'] > 0 ? ", {$t['failed_in_a_row']} failed in a row" : '',
            );
        }
        return $lines;
    }

    /**
     * Laravel's own scheduler still running beside the masters (docs/schedule.md, "Beside
     * cron"): a line per host, by its latest run, as `drover status` says it.
     *
     * @return list<string>
     */
    private static function schedulersBeside(mixed $hosts): array
    {
        if (!is_array($hosts) || isset($hosts['error'])) {
            return [];
        }
        $lines = [];
        foreach ($hosts as $h) {
            $lines[] = sprintf(
                'Laravel\'s own scheduler still runs beside drover on %s: it ran %s (%s, %s); remove it from cron there (docs/schedule.md, "Beside cron")',
                $h['host'],
                $h['task'],
                $h['at'],
                $h['status'],
            );
        }
        return $lines;
    }

    /** `42s`, `5m 3s`, `3h 20m`, `12d 4h`: as `drover status` says it. */
    private static function durationWords(float|int $secs): string
    {
        $s = (int) round(max(0, $secs));
        return match (true) {
            $s < 60 => "{$s}s",
            $s < 3600 => sprintf('%dm %ds', intdiv($s, 60), $s % 60),
            $s < 86400 => sprintf('%dh %dm', intdiv($s, 3600), intdiv($s % 3600, 60)),
            default => sprintf('%dd %dh', intdiv($s, 86400), intdiv($s % 86400, 3600)),
        };
    }

    /** The exit code: the master's own verdict. */
    public static function exitCode(array $status): int
    {
        return (int) ($status['exit_code'] ?? ($status['paused'] ? 1 : 0));
    }

    /**
     * Ordered groups (docs/ordered-groups.md): per queue with groups, their counts and the oldest
     * head's age; each held group with the job that holds it and what lets it go on.
     *
     * @return list<string>
     */
    private static function groupLines(mixed $groups): array
    {
        if (!is_array($groups) || isset($groups['error'])) {
            return [];
        }
        $lines = [];
        $parts = [];
        foreach ($groups['queues'] ?? [] as $queue => $g) {
            if (($g['groups'] ?? 0) > 0) {
                $parts[] = sprintf('%s %d (%d held, %d jobs waiting, oldest head %.1fs)', $queue, $g['groups'], $g['held'], $g['waiting'], $g['oldest_head_secs'] ?? 0);
            }
        }
        if ($parts !== []) {
            $lines[] = 'groups (with jobs): ' . implode(', ', $parts);
        }
        foreach ($groups['held'] ?? [] as $h) {
            $uuid = $h['uuid'] ?? '?';
            $lines[] = sprintf('  held: %s/%s by failed job %s (%s), %d waiting behind it: php artisan queue:retry %s (it runs first) or queue:forget %s', $h['queue'], $h['group'], $h['job'], $h['error'] ?? 'failed', $h['waiting'], $uuid, $uuid);
        }
        return $lines;
    }
}
