<?php

namespace Drover\Tests;

use Drover\Dashboard\Repositories\SearchRepository;
use Drover\Dashboard\Search\JobFilter;
use Drover\Dashboard\Search\PayloadText;
use Drover\Dashboard\Search\State;
use Illuminate\Database\Capsule\Manager as Capsule;
use Illuminate\Database\Connection;
use PHPUnit\Framework\TestCase;

/**
 * The console's search against a real PostgreSQL: each filter finds exactly its jobs in each
 * state — a class by its full or short name, a tag in either of Laravel's encodings and not the
 * same text elsewhere in a payload, text, a group, a limit key, a host — pages follow each other
 * without a gap, a filter for another state is refused naming what it applies to, and a payload
 * that is not JSON never fails a search.
 */
final class SearchTest extends TestCase
{
    private Connection $db;

    private \PDO $pdo;

    protected function setUp(): void
    {
        $this->pdo = PostgresServer::get()->pdo();
        $this->pdo->exec('TRUNCATE drover.jobs, drover.group_jobs, drover.limit_waiting, drover.failed_jobs, drover.nodes');
        $server = PostgresServer::get();
        $capsule = new Capsule();
        $capsule->addConnection(['driver' => 'pgsql', 'host' => $server->socketDir(), 'database' => 'drover', 'username' => 'drover', 'password' => '', 'charset' => 'utf8', 'prefix' => '', 'schema' => 'public']);
        $this->db = $capsule->getConnection();
    }

    private static function payload(string $class, array $tags = [], string $extra = '', bool $escaped = false): string
    {
        $flags = $escaped ? 0 : JSON_UNESCAPED_UNICODE;
        return (string) json_encode(['uuid' => 'u', 'displayName' => $class, 'job' => 'Illuminate\\Queue\\CallQueuedHandler@call', 'tags' => $tags, 'data' => ['command' => $extra]], $flags);
    }

    private function job(string $queue, string $payload, string $state = 'pending', ?string $grp = null, int $attempts = 0): int
    {
        $available = $state === 'delayed' ? "now() + interval '1 hour'" : 'now()';
        $st = $this->pdo->prepare("INSERT INTO drover.jobs (queue, payload, available_at, attempts, grp) VALUES (?, ?, $available, ?, ?) RETURNING id");
        $st->execute([$queue, $payload, $attempts, $grp]);
        $id = (int) $st->fetchColumn();
        if ($state === 'running') {
            $node = (int) $this->pdo->query("INSERT INTO drover.nodes (hostname, pid, started_at, heartbeat_at) VALUES ('web-7', 1, now(), now()) RETURNING id")->fetchColumn();
            $this->pdo->exec("UPDATE drover.jobs SET lease_token = nextval('drover.lease_tokens'), lease_owner = $node, lease_expires_at = now() + interval '30 s' WHERE id = $id");
        }
        return $id;
    }

    /** @return list<int> the ids a search finds, on every page */
    private function ids(array $query): array
    {
        [$filter, $problems] = JobFilter::fromQuery($query);
        $this->assertSame([], $problems);
        $repo = new SearchRepository($this->db);
        $ids = [];
        $after = null;
        do {
            [$rows, $after, $partial] = $repo->page($filter, $after);
            $this->assertFalse($partial, 'a small table is read within its time');
            foreach ($rows as $row) {
                $ids[] = (int) $row->id;
            }
        } while ($after !== null);
        [$count, $exact] = $repo->count($filter);
        $this->assertTrue($exact);
        $this->assertSame(count($ids), $count, 'the count says what the pages show');
        return $ids;
    }

    public function testEachFilterFindsExactlyItsJobs(): void
    {
        $invoice = $this->job('billing', self::payload('App\\Jobs\\SendInvoice', ['customer:42']));
        $invoiceEscaped = $this->job('billing', self::payload('App\\Jobs\\SendInvoice', ['Bäcker:7'], '', true));
        $other = $this->job('billing', self::payload('App\\Jobs\\SendInvoiceReminder', [], 'mentions "customer:42" and Bäcker:7'));
        $short = $this->job('default', self::payload('SendInvoice', ['Bäcker:7']));
        $later = $this->job('billing', self::payload('App\\Jobs\\SendInvoice'), 'delayed');
        $running = $this->job('billing', self::payload('App\\Jobs\\SendInvoice', [], 'card 4242'), 'running', null, 2);
        $grouped = $this->job('billing', self::payload('App\\Jobs\\Ship'), 'pending', 'order-9');
        $this->pdo->exec("INSERT INTO drover.jobs (queue, payload) VALUES ('billing', 'not json at all \"displayName\":\"')");

        $this->assertSame([$invoice, $invoiceEscaped, $short], $this->ids(['class' => 'SendInvoice']), 'short name: any namespace, not a longer name');
        $this->assertSame([$invoice, $invoiceEscaped], $this->ids(['class' => 'App\\Jobs\\SendInvoice']));
        $this->assertSame([$invoice, $invoiceEscaped], $this->ids(['class' => '\\App\\Jobs\\SendInvoice']));
        $this->assertSame([$other], $this->ids(['class' => 'SendInvoiceReminder']));
        $this->assertSame([$invoice], $this->ids(['tag' => 'customer:42']), 'the tag, not the same text in the command');
        $this->assertSame([$invoiceEscaped, $short], $this->ids(['tag' => 'Bäcker:7']), 'both encodings');
        $this->assertSame([$other], $this->ids(['text' => 'Bäcker:7', 'queue' => 'billing', 'class' => 'SendInvoiceReminder']));
        $this->assertSame([$invoice, $invoiceEscaped, $other, $grouped], array_values(array_diff($this->ids(['queue' => 'billing']), [$grouped + 1])));
        $this->assertSame([$grouped], $this->ids(['group' => 'order-9']));
        $this->assertSame([$later], $this->ids(['state' => 'delayed']));
        $this->assertSame([$running], $this->ids(['state' => 'running', 'host' => 'web-7', 'attempts' => '2', 'text' => 'card 4242']));
        $this->assertSame([], $this->ids(['state' => 'running', 'host' => 'web-8']));
        $this->assertSame([], $this->ids(['state' => 'running', 'attempts' => '3']));
        $this->assertSame([$running], $this->ids(['state' => 'running', 'since' => date('Y-m-d', time() - 86400)]));
        $this->assertSame([], $this->ids(['state' => 'running', 'until' => date('Y-m-d', time() - 86400)]));
    }

    public function testHeldAndKeptJobsAreFoundByTheirOwnFilters(): void
    {
        $this->pdo->exec("INSERT INTO drover.group_jobs (queue, grp, position, id, payload, available_at, created_at)
            VALUES ('billing', 'order-1', 2, 9001, '" . self::payload('App\\Jobs\\Ship') . "', now(), now())");
        $this->pdo->exec("INSERT INTO drover.limit_waiting (id, queue, payload, available_at, created_at, keys, caps, windows, waits_on)
            VALUES (9002, 'billing', '" . self::payload('App\\Jobs\\CallApi') . "', now(), now(), '{api:stripe}', '{2}', '{0}', 'api:stripe')");
        $this->pdo->exec("INSERT INTO drover.failed_jobs (id, queue, payload, attempts, error, failed_at)
            VALUES (9003, 'billing', 'garbage', 3, 'Unreadable payload: Syntax error', now())");
        $this->assertSame([9001, 9002], $this->ids(['state' => 'held']));
        $this->assertSame([9001], $this->ids(['state' => 'held', 'group' => 'order-1']));
        $this->assertSame([9002], $this->ids(['state' => 'held', 'limit' => 'api:stripe']));
        $this->assertSame([9003], $this->ids(['state' => 'kept', 'exception' => 'UNREADABLE']));
        $this->assertSame([], $this->ids(['state' => 'kept', 'exception' => 'timeout']));
    }

    public function testPagesFollowEachOtherAndACountAboveTheCapSaysMoreThan(): void
    {
        $this->pdo->exec("INSERT INTO drover.jobs (queue, payload) SELECT 'bulk', '" . self::payload('App\\Jobs\\Noop') . "' FROM generate_series(1, 10050)");
        $repo = new SearchRepository($this->db);
        [$filter] = JobFilter::fromQuery(['queue' => 'bulk']);
        [$first, $after] = $repo->page($filter);
        [$second] = $repo->page($filter, (string) $after);
        $this->assertCount(50, $first);
        $this->assertSame((int) end($first)->id + 1, (int) $second[0]->id, 'no gap, no repeat');
        $this->assertSame([10000, false], $repo->count($filter), 'more than the cap');
    }

    public function testKeysFarApartAreReadWindowByWindowWithoutAGapOrARepeat(): void
    {
        // Ids spread over millions: many windows of keys, each growing while it is quick.
        $ids = [];
        foreach ([1, 2, 30000, 250000, 1800000, 9000000] as $base) {
            foreach (range(0, 19) as $i) {
                $ids[] = $base + $i * 7;
            }
        }
        $st = $this->pdo->prepare("INSERT INTO drover.jobs (id, queue, payload) VALUES (?, 'far', ?)");
        foreach ($ids as $id) {
            $st->execute([$id, self::payload('App\\Jobs\\Far', [], $id % 2 ? 'odd' : 'even')]);
        }
        sort($ids);
        $this->assertSame($ids, $this->ids(['queue' => 'far']));
        $odd = array_values(array_filter($ids, fn ($id) => $id % 2 === 1));
        $this->assertSame($odd, $this->ids(['queue' => 'far', 'text' => 'odd']));
    }

    public function testAFilterForAnotherStateOrABadValueIsRefusedNamingIt(): void
    {
        $problems = fn (array $q) => JobFilter::fromQuery($q)[1];
        $this->assertSame(['host does not apply to pending jobs (it applies to running, completed)'], $problems(['host' => 'web-1']));
        $this->assertSame(['state must be one of pending, delayed, running, held, completed, failed, kept'], $problems(['state' => 'gone']));
        $this->assertStringStartsWith('attempts must be a whole number', $problems(['attempts' => '-1'])[0]);
        $this->assertStringStartsWith('batch must be a batch id', $problems(['batch' => "x' OR 1=1"])[0]);
        $this->assertStringStartsWith('class must be a PHP class name', $problems(['class' => 'App\\Jobs\\'])[0]);
        $this->assertStringStartsWith('since must be a time', $problems(['since' => 'yesterday'])[0]);
        $this->assertSame(['since must be before until'], $problems(['since' => '2026-12-07', 'until' => '2026-12-06']));
        $this->assertSame([], $problems(['queue' => '', 'class' => ' ', 'state' => 'pending']), 'empty is no filter');
        [$filter] = JobFilter::fromQuery(['state' => 'failed', 'class' => 'SendInvoice', 'exception' => 'timeout']);
        $this->assertSame(['state' => 'failed', 'class' => 'SendInvoice', 'exception' => 'timeout'], $filter->query());
    }

    public function testFailedAtIsComparedInTheApplicationsWallTimeAndDroversTimesWithTheirZone(): void
    {
        $zone = new \DateTimeZone('America/New_York');
        [$failed] = JobFilter::fromQuery(['state' => 'failed', 'since' => '2026-12-07 10:00'], $zone);
        [$where, $bindings] = \Drover\Dashboard\Search\Source::of(State::Failed)->where($failed);
        $this->assertStringContainsString('s.at >= ?::timestamp', $where);
        $this->assertSame(['2026-12-07 10:00:00'], $bindings, "the failer's failed_at: a wall time in the application's zone");
        [$pending] = JobFilter::fromQuery(['state' => 'pending', 'since' => '2026-12-07 10:00'], $zone);
        [$where, $bindings] = \Drover\Dashboard\Search\Source::of(State::Pending)->where($pending);
        $this->assertStringContainsString('s.at >= ?::timestamptz', $where);
        $this->assertSame(['2026-12-07T10:00:00-05:00'], $bindings);
    }

    public function testARegexQuotedNameMatchesOnlyItself(): void
    {
        foreach (['a.b', 'x(y)*', '[z]', 'q\\r', 'a|b', '^$'] as $text) {
            $row = $this->db->selectOne('SELECT ? ~ ? AS same, ? ~ ? AS other', [$text, '^' . PayloadText::regexQuote($text) . '$', 'zz' . $text, '^' . PayloadText::regexQuote($text) . '$']);
            $this->assertTrue($row->same, $text);
            $this->assertFalse($row->other, $text);
        }
    }
}
