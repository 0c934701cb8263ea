<?php

namespace Drover\Dashboard\Search;

/**
 * Where one state's jobs are read, and how each filter is a condition on it: the console's search
 * SQL for that state in one place. `from` is a relation with the columns every state gives —
 * `key` (what an action names the job by), `id`, `queue`, `payload`, `attempts`, `at` (the
 * state's time: dispatched, finished or failed), `row_xmin` (the row version's transaction: what
 * tells a bulk action whether the row changed since its preview, Actions\Previewed), and the
 * state's own (`grp`, `keys`, `host`, `exception`) — so that a search, its count and a bulk
 * action's batches read the same rows.
 */
final class Source
{
    /**
     * @param string $from a relation (table or subquery) with the columns above
     * @param string $base the condition that makes a row of this state
     * @param string $key the column results are ordered, paged and read window by window by (the
     *        relation's `key` column is what an action names a job by)
     * @param bool $newestFirst results newest first (finished states) or oldest first (live ones)
     * @param bool $numericKey whether the key is a number (a job's id) or text (a failer's uuid)
     * @param ?string $bounds a statement giving the lowest and highest key (`lo`, `hi`) through
     *        the table's primary key, for a search read window by window (null: read whole)
     */
    public function __construct(
        public readonly State $state,
        public readonly string $from,
        public readonly string $base,
        public readonly string $key,
        public readonly bool $newestFirst,
        public readonly bool $numericKey = true,
        public readonly ?string $bounds = null,
    ) {
    }

    /** drover.jobs' lowest and highest id, through its primary key. */
    private const JOBS_BOUNDS = 'SELECT min(id) AS lo, max(id) AS hi FROM drover.jobs';

    /**
     * Each state's source. $failedTable is the failer's table (config queue.failed.table) and
     * $failedKey its key (`uuid` for database-uuids, else `id`).
     */
    public static function of(State $state, string $failedTable = 'failed_jobs', string $failedKey = 'id'): self
    {
        $jobs = "(SELECT id AS key, id, queue, payload, attempts, created_at AS at, grp, NULL::text[] AS keys,
                         (SELECT hostname FROM drover.nodes n WHERE n.id = jobs.lease_owner) AS host,
                         failure AS exception, available_at, lease_token, xmin AS row_xmin
                  FROM drover.jobs) AS s";
        return match ($state) {
            State::Pending => new self($state, $jobs, 's.lease_token IS NULL AND s.available_at <= now()', 'key', false, true, self::JOBS_BOUNDS),
            State::Delayed => new self($state, $jobs, 's.lease_token IS NULL AND s.available_at > now()', 'key', false, true, self::JOBS_BOUNDS),
            // As many as run at once: read whole.
            State::Running => new self($state, $jobs, 's.lease_token IS NOT NULL', 'key', false),
            State::Held => new self($state, "(SELECT id AS key, id, queue, payload, 0 AS attempts, created_at AS at, grp, NULL::text[] AS keys, NULL::text AS host, NULL::text AS exception, xmin AS row_xmin FROM drover.group_jobs
                                              UNION ALL
                                              SELECT id, id, queue, payload, 0, created_at, grp, keys, NULL, NULL, xmin FROM drover.limit_waiting) AS s", 'true', 'key', false),
            State::Completed => new self($state, "(SELECT id AS key, id, attempt, queue, payload, attempt AS attempts, finished_at AS at, NULL::text AS grp, NULL::text[] AS keys, hostname AS host, NULL::text AS exception, class, runtime_ms, xmin AS row_xmin FROM drover.recent_jobs) AS s", 'true', 'key', true, true, 'SELECT min(id) AS lo, max(id) AS hi FROM drover.recent_jobs'),
            // Read in the order of the failer's `id` (both of Laravel's database failers have
            // one), acted on by the key its find(), retry and forget take (`key`: the uuid for
            // database-uuids).
            State::Failed => new self(
                $state,
                '(SELECT ' . self::ident($failedKey) . '::text AS key, id, queue, payload, NULL::integer AS attempts, failed_at AS at, NULL::text AS grp, NULL::text[] AS keys, NULL::text AS host, exception, xmin AS row_xmin FROM ' . self::ident($failedTable) . ') AS s',
                'true',
                'id',
                true,
                true,
                'SELECT min(id) AS lo, max(id) AS hi FROM ' . self::ident($failedTable),
            ),
            State::Kept => new self($state, '(SELECT id AS key, id, queue, payload, attempts, failed_at AS at, NULL::text AS grp, NULL::text[] AS keys, NULL::text AS host, error AS exception, xmin AS row_xmin FROM drover.failed_jobs) AS s', 'true', 'key', true, true, 'SELECT min(id) AS lo, max(id) AS hi FROM drover.failed_jobs'),
        };
    }

    /**
     * The filter as a condition on this source (its base included) and its bindings, in order.
     *
     * @return array{0: string, 1: list<mixed>}
     */
    public function where(JobFilter $filter): array
    {
        $conditions = [$this->base];
        $bindings = [];
        $add = function (string $sql, array $values = []) use (&$conditions, &$bindings) {
            $conditions[] = $sql;
            array_push($bindings, ...$values);
        };
        foreach ($filter->values as $name => $value) {
            match ($name) {
                'queue' => $add('s.queue = ?', [$value]),
                'class' => $this->state === State::Completed
                    ? $add("(s.class = ? OR right(s.class, ?) = ?)", [$filter->className(), strlen((string) $filter->className()) + 1, '\\' . $filter->className()])
                    : $add(...PayloadText::class('s.payload', (string) $filter->className())),
                'tag' => $add(...PayloadText::tag('s.payload', $value)),
                'text' => $add(...PayloadText::text('s.payload', $value)),
                // A batch's jobs carry its id in their serialized command (not encrypted ones).
                'batch' => $add('strpos(s.payload, ?) > 0', [strtolower($value)]),
                'group' => $add('s.grp = ?', [$value]),
                'limit' => $add('? = ANY(s.keys)', [$value]),
                'host' => $add('s.host = ?', [$value]),
                'attempts' => $add('s.attempts >= ?', [(int) $value]),
                'exception' => $add("strpos(lower(s.exception), lower(?)) > 0", [$value]),
                'since' => $add('s.at >= ' . $this->time(), [$this->timeValue($filter->times['since'])]),
                'until' => $add('s.at < ' . $this->time(), [$this->timeValue($filter->times['until'])]),
            };
        }
        return [implode(' AND ', $conditions), $bindings];
    }

    /**
     * A time as this state's column holds it: drover's are `timestamptz`; Laravel's failer
     * writes `failed_at` without a zone, in the application's (the zone the filter's times were
     * read in), so it is compared in that zone's wall time.
     */
    private function time(): string
    {
        return $this->state === State::Failed ? '?::timestamp' : '?::timestamptz';
    }

    private function timeValue(\DateTimeImmutable $time): string
    {
        return $this->state === State::Failed ? $time->format('Y-m-d H:i:s') : $time->format(\DATE_ATOM);
    }

    /** The order results are shown and batches are taken in. */
    public function order(): string
    {
        return "s.{$this->key} " . ($this->newestFirst ? 'DESC' : 'ASC');
    }

    /**
     * The condition that keeps a window of keys (two bindings, its ends): in the page's order,
     * after one end and up to the other.
     */
    public function window(): string
    {
        $cast = $this->numericKey ? '::bigint' : '';
        return $this->newestFirst
            ? "s.{$this->key} < ?$cast AND s.{$this->key} >= ?$cast"
            : "s.{$this->key} > ?$cast AND s.{$this->key} <= ?$cast";
    }

    /** The condition that starts a page (or a batch) after $after, in this source's order. */
    public function after(): string
    {
        $cast = $this->numericKey ? '?::bigint' : '?';
        return "s.{$this->key} " . ($this->newestFirst ? '<' : '>') . " $cast";
    }

    /**
     * The condition a bulk action's next batch starts after (its cursor), in key order: a bulk
     * action walks a state's jobs oldest key first, whatever order the page shows.
     */
    public function afterCursor(): string
    {
        return "s.{$this->key} > " . ($this->numericKey ? '?::bigint' : '?');
    }

    /** A table name as an identifier (`schema.table` allowed). */
    private static function ident(string $name): string
    {
        if (preg_match('/^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$/', $name) !== 1) {
            throw new \InvalidArgumentException("drover: the failed jobs table name $name is not a plain table name (config queue.failed.table)");
        }
        return implode('.', array_map(fn ($part) => '"' . $part . '"', explode('.', $name)));
    }
}
