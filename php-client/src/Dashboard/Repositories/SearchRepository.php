<?php

namespace Drover\Dashboard\Repositories;

use Drover\Dashboard\Limits;
use Drover\Dashboard\Payloads;
use Drover\Dashboard\Search\JobFilter;
use Drover\Dashboard\Search\Source;
use Drover\Dashboard\Search\State;
use Illuminate\Database\ConnectionInterface;
use Illuminate\Database\QueryException;
use Illuminate\Support\Facades\DB;

/**
 * The console's search (docs/dashboard.md, "Search"): a page of the jobs a JobFilter matches in
 * its state, in the state's order, and how many match — exactly up to Limits::SEARCH_COUNT_CAP,
 * else "more than"; a count the database cannot finish within Limits::SEARCH_COUNT_MS is said
 * to be one it did not finish, never guessed. The SQL of each state is its Search\Source; the
 * failed state reads Laravel's database failer, on its own connection.
 */
final class SearchRepository
{
    public function __construct(private ConnectionInterface $db)
    {
    }

    /** The connection and source a state is read from. @return array{0: ConnectionInterface, 1: Source} */
    public function sourceOf(State $state): array
    {
        if ($state !== State::Failed) {
            return [$this->db, Source::of($state)];
        }
        $config = (array) config('queue.failed', []);
        $driver = $config['driver'] ?? null;
        if (!in_array($driver, ['database', 'database-uuids'], true)) {
            throw new SearchUnavailable("failed jobs can be searched with Laravel's database failer (queue.failed.driver database or database-uuids), not " . json_encode($driver));
        }
        $db = DB::connection($config['database'] ?? null);
        if ($db->getDriverName() !== 'pgsql') {
            throw new SearchUnavailable('failed jobs can be searched where the failer keeps them on PostgreSQL; its connection ' . json_encode($config['database'] ?? null) . ' is ' . $db->getDriverName());
        }
        return [$db, Source::of($state, (string) ($config['table'] ?? 'failed_jobs'), $driver === 'database-uuids' ? 'uuid' : 'id')];
    }

    /**
     * A page of matches, after the key $after (null: the first page), each decorated as the job
     * lists are (Payloads::decode), and the key to ask the next page after (null: no more).
     *
     * @return array{0: list<object>, 1: ?string}
     */
    public function page(JobFilter $filter, ?string $after = null): array
    {
        if ($filter->state === State::Completed && !$this->hasHistory()) {
            return [[], null];
        }
        [$db, $source] = $this->sourceOf($filter->state);
        [$where, $bindings] = $source->where($filter);
        if ($after !== null) {
            $where .= ' AND ' . $source->after();
            $bindings[] = $after;
        }
        $limit = Limits::PAGE + 1;
        $rows = $db->select("SELECT s.* FROM {$source->from} WHERE $where ORDER BY {$source->order()} LIMIT $limit", $bindings);
        $next = null;
        if (count($rows) > Limits::PAGE) {
            $rows = array_slice($rows, 0, Limits::PAGE);
            $next = (string) end($rows)->{$source->key};
        }
        foreach ($rows as $row) {
            Payloads::decode($row);
            $row->exception_first_line = strtok((string) ($row->exception ?? ''), "\n") ?: '';
        }
        return [$rows, $next];
    }

    /**
     * How many match: [count, exact]. Exact up to the cap; [cap, false] means more than it;
     * [null, false] that the count did not finish within its time (a rare match in a big
     * backlog: narrow the search by queue or time).
     *
     * @return array{0: ?int, 1: bool}
     */
    public function count(JobFilter $filter): array
    {
        if ($filter->state === State::Completed && !$this->hasHistory()) {
            return [0, true];
        }
        [$db, $source] = $this->sourceOf($filter->state);
        [$where, $bindings] = $source->where($filter);
        $cap = Limits::SEARCH_COUNT_CAP;
        $limit = $cap + 1;
        try {
            $count = $db->transaction(function () use ($db, $source, $where, $bindings, $limit) {
                $db->statement('SET LOCAL statement_timeout = ' . Limits::SEARCH_COUNT_MS);
                return (int) $db->selectOne("SELECT count(*) AS n FROM (SELECT 1 FROM {$source->from} WHERE $where LIMIT $limit) c", $bindings)->n;
            });
        } catch (QueryException $e) {
            if (($e->errorInfo[0] ?? $e->getCode()) === '57014') {
                return [null, false];
            }
            throw $e;
        }
        return $count > $cap ? [$cap, false] : [$count, true];
    }

    private function hasHistory(): bool
    {
        return (bool) $this->db->selectOne("SELECT to_regclass('drover.recent_jobs') IS NOT NULL AS present")->present;
    }
}
