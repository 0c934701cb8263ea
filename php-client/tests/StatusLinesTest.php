<?php

namespace Drover\Tests;

use Drover\Control\StatusLines;
use PHPUnit\Framework\TestCase;

/**
 * drover:status over the status document as the master's own types write it: the fixture is
 * generated from src/status_document.rs (its tests fail when the types change and the fixture
 * was not rewritten), so a key this side reads and the master no longer writes fails here.
 */
final class StatusLinesTest extends TestCase
{
    /** @return array<string, mixed> */
    private static function status(): array
    {
        $text = file_get_contents(__DIR__ . '/fixtures/status.json');
        self::assertIsString($text);
        return json_decode($text, true, 512, JSON_THROW_ON_ERROR);
    }

    /** @return list<string> every line and table cell, flattened */
    private static function text(array $status): array
    {
        $out = [];
        foreach (StatusLines::of($status) as $entry) {
            if ($entry[0] === 'table') {
                foreach ($entry[2] as $row) {
                    $out[] = implode(' ', array_map('strval', $row));
                }
            } else {
                $out[] = $entry[1];
            }
        }
        return $out;
    }

    public function testEveryPartOfTheMastersDocumentIsShown(): void
    {
        $lines = self::text(self::status());
        $expected = [
            'drover master pid 4242: degraded, running',
            'DEGRADED: pool emails: 0 of 2 workers serving; its circuit is open',
            'queue imports paused until resumed (queue:resume / drover:continue --queue=imports)',
            'queue reports paused for 43s more',
            'queue api budget: at most 10 jobs at once across the fleet',
            'fair queues (their tenants taken in turn): tenants',
            'pool default (queues high,default): 2 processes, 2 serving, generation 1, circuit closed; workers forked from zygote pid 5000 (ready)',
            "  outage: a running job outlives a database outage of 11-24s (outage_grace 0s); a lost host's jobs come back within 45s",
            '1 5001 busy 1 3 981 120 9.0 3600s 41% parsed 4,000 rows',
            '2 5002 idle 1 0 - 118 - 3599s -',
            'pool emails:mail (queues mail): 2 processes, 0 serving, generation 1, circuit OPEN after 5 failed starts (retry in 8s), PAUSED (drover:continue --pool=emails:mail); workers started by exec: the zygote exited before it was ready',
            "  outage: a running job outlives a database outage of 11-24s (outage_grace 120s, not in force while a master of drover 0.1 has a row); a lost host's jobs come back within 45s",
            'backlog (jobs waiting): default 12, high 0, mail 40',
            'groups (with jobs): default 3 (1 held, 9 jobs waiting, oldest head 1.2s)',
            '  held: default/order-17 by failed job 977 (RuntimeException: card declined), 4 waiting behind it: php artisan queue:retry 9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d (it runs first) or queue:forget 9b1deb4d-3b7d-4bad-9bdd-2b0d7b3dcb6d',
            'limits (keys jobs wait for, most first):',
            '  tenant:7: 120 waiting, 2 slots held, oldest due 42.0s',
            '  stripe@1s: 9 waiting, 0 slots held, 5 started in its window (ends in 1.2s), oldest due 0.5s',
            'workflows: 14 running, 2 pending; nodes waiting: 3 for a signal, 5 for a time; 1 failed in the last hour',
            'schedule: 2 task(s)',
            '  php artisan report:daily [0 * * * * Europe/Paris, one server] next in 40m 0s; last failed (due 2026-12-06T10:00:00Z, web-1): exit code 1, 2 failed in a row',
            '  prune tokens [* * * * * UTC every 10s] next in 10s; never run',
            'Laravel\'s own scheduler still runs beside drover on web-1: it ran artisan report:daily (2026-12-01T09:14:00Z, succeeded); remove it from cron there (docs/schedule.md, "Beside cron")',
            'vacuum horizon: held by session pid 4242 (nightly report, reporting, idle in transaction), open 5m 13s, 18200 transactions old; 151000 dead tuples in drover.jobs',
            'totals: 250 claimed, 238 done, 3 released, 2 failed, 1 timed out',
            'completed within their own transaction: 20 of the done (1 learned from the database after their worker died)',
        ];
        $this->assertSame($expected, $lines);
        $this->assertSame(3, StatusLines::exitCode(self::status()));
    }

    public function testADocumentWithoutTheDatabaseFiguresShowsTheRest(): void
    {
        $status = self::status();
        unset($status['backlog'], $status['groups'], $status['oldest_wait_secs'], $status['limits'], $status['schedule'], $status['horizon'], $status['progress'], $status['workflows']);
        $lines = self::text($status);
        $this->assertContains('1 5001 busy 1 3 981 120 9.0 3600s', $lines, 'no progress column without the progress read');
        foreach (StatusLines::of($status) as $entry) {
            if ($entry[0] === 'table') {
                $this->assertNotContains('progress', $entry[1]);
            }
        }
        $this->assertStringStartsWith('drover master pid 4242', $lines[0]);
        $this->assertStringStartsWith('completed within their own transaction: 20', end($lines));
        $this->assertStringStartsWith('totals: 250 claimed', $lines[count($lines) - 2]);
        foreach ($lines as $line) {
            $this->assertStringNotContainsString('backlog', $line);
            $this->assertStringNotContainsString('workflows', $line);
        }
    }

    public function testARunningJobsProgressIsShownBesideItsWorkerAsDroverStatusSaysIt(): void
    {
        $tables = array_values(array_filter(StatusLines::of(self::status()), fn ($e) => $e[0] === 'table'));
        $this->assertSame(['worker', 'pid', 'state', 'gen', 'held', 'running', 'finished', 'PSS MiB', 'uptime', 'progress'], $tables[0][1]);
        $this->assertSame('41% parsed 4,000 rows', $tables[0][2][0][9]);

        $this->assertSame('100%', StatusLines::progressWords(['percent' => 100, 'note' => null, 'reported_secs_ago' => 2.0]));
        $this->assertSame('7%', StatusLines::progressWords(['percent' => 7, 'note' => '  ', 'reported_secs_ago' => 59.9]));
        $this->assertSame('41% parsed (5m 3s ago)', StatusLines::progressWords(['percent' => 41, 'note' => 'parsed', 'reported_secs_ago' => 303]));
        $this->assertSame('3% ' . str_repeat('é', 59) . '…', StatusLines::progressWords(['percent' => 3, 'note' => str_repeat('é', 500), 'reported_secs_ago' => 0]));
    }

    public function testProgressOrWorkflowsThatCouldNotBeReadSaySoAndNoWorkflowIsNoLine(): void
    {
        $status = self::status();
        $status['progress'] = ['error' => 'the database did not answer in 2 s'];
        $status['workflows'] = ['error' => 'the database did not answer in 2 s'];
        $lines = self::text($status);
        $this->assertContains('progress of running jobs: could not be read: the database did not answer in 2 s', $lines);
        $this->assertContains('workflows: could not be read: the database did not answer in 2 s', $lines);
        $this->assertContains('1 5001 busy 1 3 981 120 9.0 3600s', $lines);

        $status['workflows'] = ['pending' => 0, 'running' => 0, 'nodes_waiting_for_signal' => 0, 'nodes_waiting_for_time' => 0, 'failed_last_hour' => 0];
        foreach (self::text($status) as $line) {
            $this->assertStringNotContainsString('workflows', $line);
        }
    }

    public function testAnUnreachableDatabaseIsNamedFirstAndExitsWithItsOwnCode(): void
    {
        $status = self::status();
        $status['exit_code'] = 5;
        $status['database_unreachable_secs'] = 12.4;
        array_unshift($status['problems'], 'database unreachable for 12 s: no job is claimed and no lease renewed until it answers');
        $lines = self::text($status);
        $this->assertSame('DEGRADED: database unreachable for 12 s: no job is claimed and no lease renewed until it answers', $lines[1]);
        $this->assertSame(5, StatusLines::exitCode($status));
    }

    public function testARoleThatCannotSeeOtherSessionsIsToldTheGrant(): void
    {
        $status = self::status();
        $status['horizon'] = ['oldest' => null, 'jobs_dead_tuples' => 12, 'sees_all_sessions' => false];
        $lines = self::text($status);
        $this->assertContains('vacuum horizon: nothing holds it back; 12 dead tuples in drover.jobs', $lines);
        $this->assertContains("  the master's role cannot see other roles' snapshots: GRANT pg_read_all_stats TO it (docs/operations.md)", $lines);
    }
}
