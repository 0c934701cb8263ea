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
     * lists are (Payloads::decode); the key to ask the next page after (null: no more); and
     * whether the page stopped short for time: a search that reads payloads (a class, a tag,
     * text) in a large table is read window by window of keys, for at most
     * Limits::SEARCH_PAGE_MS, and then shows what it found, with where to go on from.
     *
     * @return array{0: list<object>, 1: ?string, 2: bool}
     */
    public function page(JobFilter $filter, ?string $after = null): array
    {
        if ($filter->state === State::Completed && !$this->hasHistory()) {
            return [[], null, false];
        }
        [$db, $source] = $this->sourceOf($filter->state);
        if ($after !== null && $source->numericKey && !ctype_digit($after)) {
            $after = null; // not a key of this state: from the start
        }
        [$where, $bindings] = $source->where($filter);
        $need = Limits::PAGE + 1;
        $rows = [];
        $partial = false;
        $scannedTo = null;
        foreach ($this->windows($db, $source, $after, Limits::SEARCH_PAGE_MS) as [$window, $ends, $timeout]) {
            $sql = self::statement($source, $where, $window, $need - count($rows), false);
            $found = $this->timed($db, $sql, array_merge($bindings, $ends), $timeout);
            if ($found === null) {
                // Too slow (a cold cache): windows() tries a smaller one while time is left.
                $this->windowFailed = true;
                $partial = true;
                continue;
            }
            array_push($rows, ...$found);
            $scannedTo = $ends[1] ?? null;
            if (count($rows) >= $need) {
                break;
            }
        }
        $next = null;
        if (count($rows) > Limits::PAGE) {
            $rows = array_slice($rows, 0, Limits::PAGE);
            $next = (string) end($rows)->{$source->key};
        } elseif ($partial || $this->stoppedShort) {
            // Out of time before the end: the next page goes on from what was read.
            $partial = true;
            $next = $scannedTo ?? ($rows === [] ? $after : (string) end($rows)->{$source->key});
        }
        foreach ($rows as $row) {
            // What a result shows, redacted (its exception's first line); no payload.
            Payloads::decode($row);
        }
        return [$rows, $next, $partial];
    }

    /**
     * How many match: [count, exact]. Exact up to the cap; [cap, false] means more than it;
     * [n, false] below the cap means at least n — the count ran out of its time
     * (Limits::SEARCH_COUNT_MS) before the end, counting window by window of keys; [null,
     * false] that it counted nothing in that time. Never a guess.
     *
     * @return array{0: ?int, 1: bool}
     */
    public function count(JobFilter $filter, int $budgetMs = Limits::SEARCH_COUNT_MS): array
    {
        if ($filter->state === State::Completed && !$this->hasHistory()) {
            return [0, true];
        }
        [$db, $source] = $this->sourceOf($filter->state);
        [$where, $bindings] = $source->where($filter);
        $cap = Limits::SEARCH_COUNT_CAP;
        $count = 0;
        $counted = false;
        foreach ($this->windows($db, $source, null, $budgetMs) as [$window, $ends, $timeout]) {
            $sql = self::statement($source, $where, $window, $cap + 1 - $count, true);
            $found = $this->timed($db, $sql, array_merge($bindings, $ends), $timeout);
            if ($found === null) {
                $this->windowFailed = true;
                $this->stoppedShort = true;
                continue;
            }
            $counted = true;
            $count += (int) $found[0]->n;
            if ($count > $cap) {
                return [$cap, false];
            }
        }
        if ($this->stoppedShort) {
            return [$counted ? $count : null, false];
        }
        return [$count, true];
    }

    /**
     * The point a bulk action's preview is taken at, in one statement of the state's database:
     * its newest key (0 when it has none: the action goes no further), the database's time (UTC,
     * to the microsecond) and the oldest transaction still open (what Actions\Previewed tells
     * a row changed since by).
     *
     * @return array{upto: string, at: string, horizon: string}
     */
    public function previewPoint(State $state): array
    {
        [$db, $source] = $this->sourceOf($state);
        $row = $db->selectOne(
            "SELECT coalesce(max(s.{$source->key}), 0)::text AS upto,
                    to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"') AS at,
                    txid_snapshot_xmin(txid_current_snapshot())::text AS horizon
             FROM {$source->from}"
        );
        return ['upto' => (string) $row->upto, 'at' => (string) $row->at, 'horizon' => (string) $row->horizon];
    }

    /**
     * The statement that reads one window of a search — its rows, or (with $count) how many —
     * at most $limit, in the source's order: a window is then a range of the table's primary key,
     * never a walk of a whole partial index filtered by key (tests/SearchPlansTest.php holds every
     * state's plan to that).
     */
    public static function statement(Source $source, string $where, ?string $window, int $limit, bool $count): string
    {
        $read = "FROM {$source->from} WHERE $where" . ($window === null ? '' : " AND $window")
            . ' ORDER BY ' . $source->order() . ' LIMIT ' . $limit;
        return $count ? "SELECT count(*) AS n FROM (SELECT 1 $read) c" : "SELECT s.* $read";
    }

    /** Whether the last windows() stopped for time before the end of the keys. */
    private bool $stoppedShort = false;

    /** Set by a reader whose window did not finish in its time: windows() tries a smaller one. */
    private bool $windowFailed = false;

    /**
     * The windows of keys to read in the page's order, from $after, within $budgetMs: each as
     * [condition or null (read whole), its two ends, milliseconds it may take]. The first window
     * is small; each later one holds as many keys as half the time left reads at the pace so
     * far; the last ends at the table's end.
     * Sources without bounds are read in one statement.
     *
     * @return \Generator<array{0: ?string, 1: list<string>, 2: int}>
     */
    private function windows(ConnectionInterface $db, Source $source, ?string $after, int $budgetMs): \Generator
    {
        $this->stoppedShort = false;
        $started = microtime(true);
        $left = fn () => (int) ($budgetMs - (microtime(true) - $started) * 1000);
        if ($source->bounds === null) {
            // Read whole (running jobs, jobs held behind groups and limits: as many as wait
            // there), with at least the first window's time, whatever the load.
            yield [$after === null ? null : $source->after(), $after === null ? [] : [$after], max($budgetMs, Limits::SEARCH_FIRST_WINDOW_MS)];
            return;
        }
        $bounds = $db->selectOne($source->bounds);
        if ($bounds === null || $bounds->lo === null) {
            return;
        }
        [$lo, $hi] = [(int) $bounds->lo, (int) $bounds->hi];
        $size = Limits::SEARCH_WINDOW;
        // Milliseconds per key, as measured (null: not yet).
        $pace = null;
        $at = $after !== null && ctype_digit($after) ? (int) $after : ($source->newestFirst ? $hi + 1 : $lo - 1);
        while ($source->newestFirst ? $at > $lo : $at < $hi) {
            $remaining = $left();
            // Out of time — but never before the first window: reading the bounds on a loaded
            // host may take all of a short box (the tag page's 35 ms), and a small table must
            // still be counted whole.
            if ($remaining < 10 && $pace !== null) {
                $this->stoppedShort = true;
                return;
            }
            $to = $source->newestFirst ? max($lo, $at - $size) : min($hi, $at + $size);
            // A window may take three times what its pace says (pages not in memory yet), never
            // all that is left when a smaller one could still be read after it.
            // The first window (a few thousand keys: little work) is read whatever the load, so a
            // small table is always counted and shown whole; the time box applies after it.
            $limit = $pace === null
                ? max($remaining, Limits::SEARCH_FIRST_WINDOW_MS)
                : (int) min($remaining, max(15, 3 * $pace * abs($to - $at)));
            $this->windowFailed = false;
            $t = microtime(true);
            yield [$source->window(), [(string) $at, (string) $to], $limit];
            $took = max(0.05, (microtime(true) - $t) * 1000);
            if ($this->windowFailed) {
                // Not read: the same place again, an eighth as wide.
                $size = max(100, intdiv(abs($to - $at), 8));
                $pace = max($pace ?? 0.0, $took / max(1, abs($to - $at)));
                continue;
            }
            $pace = $took / max(1, abs($to - $at));
            $at = $to;
            // The next window: as many keys as half the time left reads at this pace.
            $size = (int) max(1000, min(1_000_000, ($left() / 2) / $pace));
        }
    }

    /**
     * $sql under a statement timeout of $ms: its rows, or null when it did not finish in time.
     *
     * @return ?list<object>
     */
    private function timed(ConnectionInterface $db, string $sql, array $bindings, int $ms): ?array
    {
        try {
            return $db->transaction(function () use ($db, $sql, $bindings, $ms) {
                $db->statement('SET LOCAL statement_timeout = ' . max(1, $ms));
                return $db->select($sql, $bindings);
            });
        } catch (QueryException $e) {
            if (($e->errorInfo[0] ?? $e->getCode()) === '57014') {
                return null;
            }
            throw $e;
        }
    }

    private function hasHistory(): bool
    {
        return (bool) $this->db->selectOne("SELECT to_regclass('drover.recent_jobs') IS NOT NULL AS present")->present;
    }
}
