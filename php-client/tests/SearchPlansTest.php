<?php

namespace Drover\Tests;

use Drover\Dashboard\Repositories\SearchRepository;
use Drover\Dashboard\Search\JobFilter;
use Drover\Dashboard\Search\Source;
use Drover\Dashboard\Search\State;
use PHPUnit\Framework\TestCase;

/**
 * The console's search reads a window of keys through the table's primary key, whatever the
 * filter: checked with EXPLAIN on tables of 30,000 rows each (ANALYZEd), for every state read by
 * windows and for its page and its count — never a sequential scan, never a partial index
 * walked whole and filtered by key (what made a count read a million entries, bench/RESULTS.md).
 */
final class SearchPlansTest extends TestCase
{
    private static bool $seeded = false;

    private \PDO $pdo;

    protected function setUp(): void
    {
        $this->pdo = PostgresServer::get()->pdo();
        if (self::$seeded) {
            return;
        }
        $payload = "format('{\"displayName\":\"App\\\\Jobs\\\\C%s\",\"tags\":[\"customer:%s\"],\"data\":{\"command\":\"x\"}}', g % 10, g % 500)";
        $this->pdo->exec('TRUNCATE drover.jobs, drover.recent_jobs, drover.failed_jobs');
        $this->pdo->exec("INSERT INTO drover.jobs (queue, payload) SELECT 'q' || (g % 5), $payload FROM generate_series(1, 30000) g");
        $this->pdo->exec("INSERT INTO drover.recent_jobs (id, attempt, queue, class, payload, node, hostname, worker_pid, started_at, finished_at, runtime_ms)
            SELECT g, 1, 'q', 'App\\Jobs\\C' || (g % 10), $payload, 1, 'web', 1, now(), now(), 1 FROM generate_series(1, 30000) g");
        $this->pdo->exec("INSERT INTO drover.failed_jobs (id, queue, payload, attempts, error, failed_at) SELECT g, 'q', $payload, 1, 'boom', now() FROM generate_series(1, 30000) g");
        $this->pdo->exec('CREATE TABLE IF NOT EXISTS public.plan_failed_jobs (id bigserial PRIMARY KEY, uuid text UNIQUE, connection text, queue text, payload text, exception text, failed_at timestamp)');
        $this->pdo->exec("INSERT INTO public.plan_failed_jobs (uuid, connection, queue, payload, exception, failed_at) SELECT md5(g::text), 'drover', 'q', $payload, 'boom', now() FROM generate_series(1, 30000) g");
        foreach (['drover.jobs', 'drover.recent_jobs', 'drover.failed_jobs', 'public.plan_failed_jobs'] as $t) {
            $this->pdo->exec("ANALYZE $t");
        }
        self::$seeded = true;
    }

    /** @return array<string, array{0: Source, 1: string}> */
    private static function sources(): array
    {
        return [
            'pending' => [Source::of(State::Pending), 'jobs_pkey'],
            'delayed' => [Source::of(State::Delayed), 'jobs_pkey'],
            'completed' => [Source::of(State::Completed), 'recent_jobs_pkey'],
            'kept' => [Source::of(State::Kept), 'failed_jobs_pkey'],
            'failed (database-uuids)' => [Source::of(State::Failed, 'public.plan_failed_jobs', 'uuid'), 'plan_failed_jobs_pkey'],
        ];
    }

    public function testTheOverviewsEstimateOfAQueuePastItsCapComesFromTheStatistics(): void
    {
        $server = PostgresServer::get();
        $capsule = new \Illuminate\Database\Capsule\Manager();
        $capsule->addConnection(['driver' => 'pgsql', 'host' => $server->socketDir(), 'database' => 'drover', 'username' => 'drover', 'password' => '', 'charset' => 'utf8', 'prefix' => '', 'schema' => 'public']);
        $estimates = (new \Drover\Dashboard\Repositories\QueueRepository($capsule->getConnection()))->estimates();
        foreach (['q0', 'q1', 'q2', 'q3', 'q4'] as $queue) {
            $this->assertEqualsWithDelta(6000, $estimates[$queue] ?? 0, 600, json_encode($estimates));
        }
    }

    public function testEveryWindowIsARangeOfThePrimaryKeyForEveryFilter(): void
    {
        $filters = [[], ['class' => 'C3'], ['tag' => 'customer:42'], ['text' => 'C7'], ['queue' => 'q2', 'class' => 'C1'], ['since' => '2020-01-01']];
        foreach (self::sources() as $name => [$source, $index]) {
            $this->assertNotNull($source->bounds, "$name is read window by window");
            foreach ($filters as $query) {
                if (isset($query['queue']) && $source->state === State::Kept) {
                    continue;
                }
                [$filter, $problems] = JobFilter::fromQuery(['state' => $source->state->value] + $query, new \DateTimeZone('UTC'));
                $this->assertSame([], $problems);
                [$where, $bindings] = $source->where($filter);
                $ends = $source->newestFirst ? ['20000', '18000'] : ['10000', '12000'];
                foreach ([false, true] as $count) {
                    $sql = SearchRepository::statement($source, $where, $source->window(), 51, $count);
                    $st = $this->pdo->prepare("EXPLAIN $sql");
                    $st->execute(array_merge($bindings, $ends));
                    $plan = implode("\n", $st->fetchAll(\PDO::FETCH_COLUMN));
                    $what = "$name " . json_encode($query) . ($count ? ' count' : ' page') . ":\n$plan";
                    // An index scan or a bitmap of it: either reads only the window's range.
                    $this->assertMatchesRegularExpression("/(using|on) $index/", $plan, $what);
                    $this->assertMatchesRegularExpression('/Index Cond: \(\(id [<>]=? /', $plan, $what);
                    $this->assertStringNotContainsString('Seq Scan', $plan, $what);
                }
            }
        }
    }
}
