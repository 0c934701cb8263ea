<?php

namespace Drover\Dashboard\Repositories;

use Drover\Dashboard\Limits;
use Drover\Dashboard\Redaction;
use Drover\Dashboard\Workflows\WorkflowFilter;
use Drover\Schema\BrokerQuery;
use Illuminate\Database\ConnectionInterface;
use Illuminate\Database\QueryException;

/**
 * Workflows as the console reads them (drover.workflows, drover.workflow_nodes,
 * drover.workflow_steps, drover.workflow_signals, migration 0016): the list and its search,
 * newest first, a page at a time by keyset (created_at, id) through the indexes 0016 made for it
 * (tests/WorkflowPlansTest.php holds each search to them); one workflow, its nodes, its steps
 * counted per node and state in one pass of workflow_steps_node, and only the steps a page lists
 * — a node's failed ones and running ones, at most Limits::WORKFLOW_STEPS_LISTED each, never all
 * of a node of 100,000; the workflow a job is a step of. What the operator does to them is
 * WorkflowActionRepository's.
 */
final class WorkflowRepository
{
    /** A list row's columns, its run time so far and its cursor (its created_at to the microsecond, in UTC, and its id). */
    private const LIST_COLUMNS = 'w.id, w.name, w.state, w.parent, w.parent_node, w.nodes, w.nodes_left, w.steps,
        w.created_at, w.started_at, w.finished_at,
        extract(epoch FROM coalesce(w.finished_at, now()) - w.started_at) AS run_secs,
        to_char(w.created_at AT TIME ZONE \'UTC\', \'YYYY-MM-DD"T"HH24:MI:SS.US"Z"\') || \'_\' || w.id AS cursor';

    public function __construct(private ConnectionInterface $db)
    {
    }

    // ------------------------------------------------------------------ the list

    /** The list read walking workflows_age or workflows_state_age newest first (the name, if any, a filter). */
    public const WALK = 'walk';

    /** The list read through workflows_name's range of the prefix (or an age's range of workflows_age), then sorted newest first. */
    public const BY_NAME = 'by-name';

    /**
     * A common prefix's page read by name without a sort of all its rows: the page's oldest
     * time first, from the prefix's entries of workflows_name alone (an index-only read,
     * newestStatement), then BY_NAME from that time. With a state, which the index does not
     * hold, the oldest time of STATE_SPAN times as many entries: a page of a state rarer than
     * that among them comes out short, and is read BY_NAME whole.
     */
    private const STATE_SPAN = 20;

    /**
     * A page of the workflows $filter matches, newest first, after cursor $after (null: the
     * first page; one that is not a cursor: the first page too), each with its steps done and
     * failed; and the cursor of the next page (null: no more).
     *
     * Without a name, the walk (its state and age are conditions of the index). A name's prefix
     * matched by at most Limits::WORKFLOW_NAME_SORT workflows (counted through workflows_name,
     * up to one more) is read by name and sorted; one matched by more is walked — so neither a
     * rare prefix walks the whole table nor a common one sorts most of it — unless the walk
     * finds no page within Limits::WORKFLOW_WALK_MS: the prefix's workflows are common but old
     * (`import-1…` once the numbers are in the millions), and are read by name after all,
     * from the page's oldest time (STATE_SPAN).
     *
     * @return array{0: list<object>, 1: ?string}
     */
    public function page(WorkflowFilter $filter, ?string $after): array
    {
        $cursor = $after === null ? null : self::cursor($after);
        if ($filter->name === null) {
            $rows = $this->db->select(...self::listStatement($filter, $cursor, self::WALK, Limits::PAGE + 1));
        } elseif ($this->fewNamed($filter)) {
            $rows = $this->db->select(...self::listStatement($filter, $cursor, self::BY_NAME, Limits::PAGE + 1));
        } else {
            [$sql, $bindings] = self::listStatement($filter, $cursor, self::WALK, Limits::PAGE + 1);
            $rows = $this->timed($sql, $bindings, Limits::WORKFLOW_WALK_MS) ?? $this->newestByName($filter, $cursor);
        }
        $next = null;
        if (count($rows) > Limits::PAGE) {
            $rows = array_slice($rows, 0, Limits::PAGE);
            $next = (string) end($rows)->cursor;
        }
        $done = $this->stepsDone(array_map(fn (object $r) => (int) $r->id, $rows));
        foreach ($rows as $row) {
            $row->steps_done = $done[(int) $row->id]['done'] ?? 0;
            $row->steps_failed = $done[(int) $row->id]['failed'] ?? 0;
        }
        return [$rows, $next];
    }

    /**
     * A page of a common prefix whose workflows are old, read by name (STATE_SPAN): its oldest
     * time, then the rows from it; read whole by name when a state made it short.
     *
     * @param ?array{0: string, 1: string} $cursor
     * @return list<object>
     */
    public function newestByName(WorkflowFilter $filter, ?array $cursor): array
    {
        // None older than the cursor's time: only those at it may be left (a dispatch of many in
        // one transaction shares its time).
        $since = $this->db->selectOne(...self::newestStatement($filter, $cursor, Limits::PAGE + 1))->since ?? $cursor[0] ?? null;
        if ($since === null) {
            return [];
        }
        $rows = $this->db->select(...self::listStatement($filter, $cursor, self::BY_NAME, Limits::PAGE + 1, (string) $since));
        if ($filter->state !== null && count($rows) <= Limits::PAGE) {
            $rows = $this->db->select(...self::listStatement($filter, $cursor, self::BY_NAME, Limits::PAGE + 1));
        }
        return $rows;
    }

    /**
     * The statement that finds a page's oldest time among a prefix's workflows (`since`, in UTC
     * to the microsecond; null: none): the $limit-th newest entry of the prefix's range of
     * workflows_name older than the cursor's time (those at it, not shown yet, are taken by the
     * cursor's own condition) — STATE_SPAN times further with a state — read from the index
     * alone, in its own order (~<~).
     *
     * @param ?array{0: string, 1: string} $cursor
     * @return array{0: string, 1: list<mixed>}
     */
    public static function newestStatement(WorkflowFilter $filter, ?array $cursor, int $limit): array
    {
        $where = ['x.name LIKE ?'];
        $bindings = [(string) $filter->likePattern()];
        if ($filter->withinSecs !== null) {
            $where[] = 'x.created_at >= now() - make_interval(secs => ?::float8)';
            $bindings[] = $filter->withinSecs;
        }
        if ($cursor !== null) {
            $where[] = 'x.created_at < ?::timestamptz';
            $bindings[] = $cursor[0];
        }
        $span = $filter->state === null ? $limit : $limit * self::STATE_SPAN;
        return [
            'SELECT to_char(min(e.created_at) AT TIME ZONE \'UTC\', \'YYYY-MM-DD"T"HH24:MI:SS.US"Z"\') AS since FROM (
                 SELECT n.created_at FROM (SELECT x.created_at FROM drover.workflows x WHERE ' . implode(' AND ', $where) . ' ORDER BY x.name USING ~<~ OFFSET 0) n
                 ORDER BY n.created_at DESC LIMIT ' . (int) $span . '
             ) e',
            $bindings,
        ];
    }

    /**
     * $sql under a statement timeout of $ms: its rows, or null when it did not finish in time.
     *
     * @return ?list<object>
     */
    private function timed(string $sql, array $bindings, int $ms): ?array
    {
        try {
            return $this->db->transaction(function () use ($sql, $bindings, $ms) {
                $this->db->statement('SET LOCAL statement_timeout = ' . max(1, $ms));
                return $this->db->select($sql, $bindings);
            });
        } catch (QueryException $e) {
            if (($e->errorInfo[0] ?? $e->getCode()) === '57014') {
                return null;
            }
            throw $e;
        }
    }

    /** Whether the name's prefix (and age) matches at most Limits::WORKFLOW_NAME_SORT workflows. */
    public function fewNamed(WorkflowFilter $filter): bool
    {
        [$sql, $bindings] = self::nameCountStatement($filter);
        return (int) $this->db->selectOne($sql, $bindings)->n <= Limits::WORKFLOW_NAME_SORT;
    }

    /**
     * The statement that reads a page of the list, at most $limit rows, newest first: WALK or
     * BY_NAME (which needs a name), and with $since (a time newestStatement found) only the
     * workflows created since.
     *
     * @param ?array{0: string, 1: string} $cursor created_at and id of the last row shown
     * @return array{0: string, 1: list<mixed>}
     */
    public static function listStatement(WorkflowFilter $filter, ?array $cursor, string $way, int $limit, ?string $since = null): array
    {
        if ($way !== self::WALK && ($way !== self::BY_NAME || $filter->name === null)) {
            throw new \LogicException("drover: the list is read walking, or by name for a name's prefix, not $way");
        }
        $where = [];
        $bindings = [];
        if ($filter->name !== null) {
            if ($way === self::WALK) {
                // Not a condition any index takes, on purpose (PostgreSQL turns LIKE and
                // starts_with into a range of workflows_name): the walk is the plan.
                $where[] = 'left(w.name, ?::integer) = ?';
                array_push($bindings, mb_strlen($filter->name), $filter->name);
            } else {
                $where[] = 'w.name LIKE ?';
                $bindings[] = $filter->likePattern();
            }
        }
        if ($filter->state !== null) {
            $where[] = 'w.state = ?';
            $bindings[] = $filter->state;
        }
        if ($filter->withinSecs !== null) {
            $where[] = 'w.created_at >= now() - make_interval(secs => ?::float8)';
            $bindings[] = $filter->withinSecs;
        }
        if ($since !== null) {
            $where[] = 'w.created_at >= ?::timestamptz';
            $bindings[] = $since;
        }
        if ($cursor !== null) {
            $where[] = '(w.created_at, w.id) < (?::timestamptz, ?::bigint)';
            array_push($bindings, $cursor[0], $cursor[1]);
        }
        $condition = $where === [] ? 'true' : implode(' AND ', $where);
        // By name: the prefix's matches first (the subquery's OFFSET 0 keeps its plan its own:
        // the prefix's range of workflows_name, or an age's range of workflows_age when that is
        // shorter), then sorted.
        $from = $way === self::WALK
            ? "drover.workflows w WHERE $condition"
            : "(SELECT * FROM drover.workflows w WHERE $condition OFFSET 0) w";
        $sql = 'SELECT ' . self::LIST_COLUMNS . " FROM $from ORDER BY w.created_at DESC, w.id DESC LIMIT " . (int) $limit;
        return [$sql, $bindings];
    }

    /**
     * The statement that counts the workflows a name's prefix (and age) matches, up to one more
     * than Limits::WORKFLOW_NAME_SORT: a walk of workflows_name's range of the prefix (or, within
     * an age, of the age's range of workflows_age, when the planner finds it shorter).
     *
     * @return array{0: string, 1: list<mixed>}
     */
    public static function nameCountStatement(WorkflowFilter $filter): array
    {
        $where = ['w.name LIKE ?'];
        $bindings = [(string) $filter->likePattern()];
        if ($filter->withinSecs !== null) {
            $where[] = 'w.created_at >= now() - make_interval(secs => ?::float8)';
            $bindings[] = $filter->withinSecs;
        }
        return [
            // In workflows_name's own order (text_pattern_ops' ~<~), so that the planner reads
            // the prefix's range of it rather than the table until enough match.
            'SELECT count(*) AS n FROM (SELECT 1 FROM drover.workflows w WHERE ' . implode(' AND ', $where)
                . ' ORDER BY w.name USING ~<~ LIMIT ' . (Limits::WORKFLOW_NAME_SORT + 1) . ') c',
            $bindings,
        ];
    }

    /**
     * A page's cursor read back: [created_at, id], or null when it is not one.
     *
     * @return ?array{0: string, 1: string}
     */
    public static function cursor(string $after): ?array
    {
        if (preg_match('/^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z)_([0-9]{1,18})$/', $after, $m) !== 1) {
            return null;
        }
        return [$m[1], $m[2]];
    }

    /**
     * The steps done (completed) and failed of these workflows, from their nodes' counters (a
     * sub-workflow's node is the child's: its steps are counted there).
     *
     * @param list<int> $ids
     * @return array<int, array{done: int, failed: int}>
     */
    public function stepsDone(array $ids): array
    {
        if ($ids === []) {
            return [];
        }
        $rows = $this->db->select(
            'SELECT wf, coalesce(sum(members - members_left - failed_members) FILTER (WHERE sub_wf IS NULL), 0) AS done,
                    coalesce(sum(failed_members) FILTER (WHERE sub_wf IS NULL), 0) AS failed
             FROM drover.workflow_nodes WHERE wf = ANY(?::bigint[]) GROUP BY wf',
            [BrokerQuery::textArray(array_map('strval', $ids))]
        );
        $done = [];
        foreach ($rows as $row) {
            $done[(int) $row->wf] = ['done' => max(0, (int) $row->done), 'failed' => (int) $row->failed];
        }
        return $done;
    }

    // ------------------------------------------------------------------ one workflow

    /** Workflow $id, with its parent's name and state (a sub-workflow) and its run time so far; or null. */
    public function find(int $id): ?object
    {
        return $this->db->selectOne(
            'SELECT w.id, w.name, w.unique_name, w.state, w.parent, w.parent_node, w.nodes, w.nodes_left, w.steps,
                    w.created_at, w.started_at, w.finished_at,
                    extract(epoch FROM coalesce(w.finished_at, now()) - w.started_at) AS run_secs,
                    p.name AS parent_name, p.state AS parent_state
             FROM drover.workflows w LEFT JOIN drover.workflows p ON p.id = w.parent WHERE w.id = ?',
            [$id]
        );
    }

    /**
     * The first $limit nodes of workflow $id in declaration order: their dependencies (`deps`,
     * a list) and condition (decoded), whether their due time is still ahead, and how long they
     * ran (or run so far).
     *
     * @return list<object>
     */
    public function nodes(int $id, int $limit): array
    {
        $rows = $this->db->select(
            'SELECT name, position, array_to_json(deps)::text AS deps, on_failure, wait_secs, wait_signal, condition::text AS condition,
                    sub_wf, members, members_left, failed_members, state, cause, released_at, due_at, ended_at,
                    coalesce(due_at > now(), false) AS due_later,
                    extract(epoch FROM coalesce(ended_at, now()) - released_at) AS run_secs
             FROM drover.workflow_nodes WHERE wf = ? ORDER BY position LIMIT ' . (int) $limit,
            [$id]
        );
        foreach ($rows as $row) {
            $row->deps = array_values(array_map('strval', (array) json_decode((string) $row->deps, true)));
            $condition = $row->condition === null ? null : json_decode((string) $row->condition, true);
            $row->condition = is_array($condition) ? $condition : null;
        }
        return $rows;
    }

    /**
     * Workflow $id's steps counted per node and state, with how many recorded a result and their
     * size: one pass of the workflow's range of workflow_steps_node, however many steps.
     *
     * @return array<string, object> by node
     */
    public function stepCounts(int $id): array
    {
        $rows = $this->db->select(
            "SELECT node, count(*) AS total,
                    count(*) FILTER (WHERE state = 'pending') AS pending,
                    count(*) FILTER (WHERE state = 'queued') AS queued,
                    count(*) FILTER (WHERE state = 'completed') AS completed,
                    count(*) FILTER (WHERE state = 'failed') AS failed,
                    count(*) FILTER (WHERE state = 'cancelled') AS cancelled,
                    count(*) FILTER (WHERE state = 'skipped') AS skipped,
                    count(result) AS results, coalesce(sum(octet_length(result)), 0) AS result_bytes
             FROM drover.workflow_steps WHERE wf = ? GROUP BY node",
            [$id]
        );
        $counts = [];
        foreach ($rows as $row) {
            $counts[(string) $row->node] = $row;
        }
        return $counts;
    }

    /**
     * Workflow $id's running steps (a worker holds their job): per node the first $limit by
     * member, each with its attempt, its lease and its progress (drover.job_progress), and how
     * many run in its node (`running`). Read from the running jobs (jobs_leased), as many as run
     * at once in the whole fleet, never from the workflow's steps.
     *
     * @return array<string, list<object>> by node
     */
    public function runningSteps(int $id, int $limit): array
    {
        $rows = $this->db->select(
            'SELECT * FROM (
                 SELECT j.id, s.node, s.member, j.attempts, j.max_attempts, j.lease_expires_at,
                        p.percent, p.note, p.at AS progress_at,
                        row_number() OVER (PARTITION BY s.node ORDER BY s.member) AS nth,
                        count(*) OVER (PARTITION BY s.node) AS running
                 FROM drover.jobs j
                 JOIN drover.workflow_steps s ON s.id = j.id
                 LEFT JOIN drover.job_progress p ON p.job_id = j.id
                 WHERE j.lease_token IS NOT NULL AND j.wf = ?
             ) r WHERE nth <= ' . (int) $limit . ' ORDER BY node, member',
            [$id]
        );
        $redaction = Redaction::fromConfig();
        $byNode = [];
        foreach ($rows as $row) {
            $row->note = $row->note === null ? null : $redaction->text((string) $row->note);
            $byNode[(string) $row->node][] = $row;
        }
        return $byNode;
    }

    /**
     * The failed steps of these nodes of workflow $id: per node the first $limit by member, each
     * with its error (redacted) and its payload's uuid (what Laravel's failer knows it by); no
     * payload.
     *
     * @param list<string> $nodes
     * @return array<string, list<object>> by node
     */
    public function failedSteps(int $id, array $nodes, int $limit): array
    {
        if ($nodes === []) {
            return [];
        }
        $rows = $this->db->select(
            "SELECT s.node, s.id, s.member, s.error, s.ended_at, drover.payload_uuid(s.payload) AS uuid
             FROM unnest(?::text[]) AS n(name)
             CROSS JOIN LATERAL (
                 SELECT id, node, member, error, ended_at, payload FROM drover.workflow_steps
                 WHERE wf = ? AND node = n.name AND state = 'failed' ORDER BY member LIMIT " . (int) $limit . '
             ) s
             ORDER BY s.node, s.member',
            [BrokerQuery::textArray($nodes), $id]
        );
        $byNode = [];
        foreach ($rows as $row) {
            $byNode[(string) $row->node][] = Redaction::fromConfig()->row($row);
        }
        return $byNode;
    }

    /**
     * These workflows (sub-workflows, for their parent's page): name, state, steps, and steps
     * done and failed.
     *
     * @param list<int> $ids
     * @return array<int, object>
     */
    public function summaries(array $ids): array
    {
        if ($ids === []) {
            return [];
        }
        $rows = $this->db->select(
            'SELECT id, name, state, steps, nodes, nodes_left FROM drover.workflows WHERE id = ANY(?::bigint[])',
            [BrokerQuery::textArray(array_map('strval', $ids))]
        );
        $done = $this->stepsDone($ids);
        $summaries = [];
        foreach ($rows as $row) {
            $row->steps_done = $done[(int) $row->id]['done'] ?? 0;
            $row->steps_failed = $done[(int) $row->id]['failed'] ?? 0;
            $summaries[(int) $row->id] = $row;
        }
        return $summaries;
    }

    /**
     * The signals sent to workflow $id (the first of each name is kept), oldest first: each
     * name, when, its data's size and its data as a page may show it (redacted, at most 2,000
     * characters read).
     *
     * @return list<object>
     */
    public function signals(int $id): array
    {
        $rows = $this->db->select(
            'SELECT name, sent_at, octet_length(data) AS bytes, left(data, 2000) AS data
             FROM drover.workflow_signals WHERE wf = ? ORDER BY sent_at, name LIMIT 100',
            [$id]
        );
        $redaction = Redaction::fromConfig();
        foreach ($rows as $row) {
            if ($row->data !== null) {
                $decoded = json_decode((string) $row->data, true);
                $row->data = $redaction->show(is_array($decoded) ? $decoded : null, (string) $row->data);
            }
        }
        return $rows;
    }

    /** Step $step of workflow $wf: its node, member, state and payload's uuid; or null. */
    public function step(int $wf, int $step): ?object
    {
        return $this->db->selectOne(
            'SELECT id, wf, node, member, state, drover.payload_uuid(payload) AS uuid FROM drover.workflow_steps WHERE id = ? AND wf = ?',
            [$step, $wf]
        );
    }

    /**
     * The workflow job $job is a step of — its id (`wf`), name, state, the node and the member —
     * or null for a job that is not a step (read from the tables: a reader may not call
     * drover.workflow_of).
     */
    public function stepOf(int $job): ?object
    {
        return $this->db->selectOne(
            'SELECT s.wf, w.name, w.state, s.node, s.member, s.state AS step_state
             FROM drover.workflow_steps s JOIN drover.workflows w ON w.id = s.wf WHERE s.id = ?',
            [$job]
        );
    }

    /**
     * How many workflows not yet ended other than $except are named $name: a signal sent by a
     * workflow's id as text (drover.workflow_signal) reaches those too.
     */
    public function othersRunningNamed(string $name, int $except): int
    {
        return (int) $this->db->selectOne(
            "SELECT count(*) AS n FROM drover.workflows WHERE name = ? AND id <> ? AND state IN ('pending', 'running')",
            [$name, $except]
        )->n;
    }
}
