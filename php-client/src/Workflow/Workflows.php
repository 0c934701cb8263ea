<?php

namespace Drover\Workflow;

use Drover\Schema\BrokerQuery;
use Illuminate\Database\ConnectionInterface;
use Illuminate\Database\QueryException;

/**
 * The workflow functions the application calls (broker/migrations/0016_workflows.sql; SECURITY
 * DEFINER, granted to drover_producer and drover_operator), on the connection drover's jobs live
 * in — the drover queue connection's: a dispatch commits with the application's transaction open
 * there, and a step's result with its job's. The repository of this concern: every statement of
 * the package's workflow side is here.
 */
final class Workflows
{
    /** The most steps one drover.workflow_add_steps call carries. */
    public const STEPS_PER_CALL = 1000;

    /** The most bytes of JSON a step's result or a signal's data holds (the tables' checks: 1 MiB). */
    public const MAX_DATA = 1048576;

    public function __construct(private readonly ConnectionInterface $db)
    {
    }

    public function connection(): ConnectionInterface
    {
        return $this->db;
    }

    /**
     * Creates workflow $name, pending, with $graph's nodes (validated already); a sub-workflow
     * names its parent and the parent's node it stands for. Its id.
     *
     * @throws WorkflowAlreadyRunning for a unique name already running (SQLSTATE DRW01)
     * @throws InvalidWorkflow when the database refuses the graph (SQLSTATE 22023)
     */
    public function create(Graph $graph, bool $unique, ?int $parent = null, ?string $parentNode = null): int
    {
        $nodes = json_encode($graph->toArray(), JSON_THROW_ON_ERROR | JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES | JSON_PRESERVE_ZERO_FRACTION);
        return (int) $this->refused(fn () => $this->db->selectOne(
            'SELECT drover.workflow_create(?, ?::boolean, ?::jsonb, ?::bigint, ?) AS id',
            [$graph->name, $unique ? 'true' : 'false', $nodes, $parent === null ? null : (string) $parent, $parentNode],
            false,
        )->id, $graph->name);
    }

    /**
     * Adds steps to pending workflow $wf: one per element, in order — its node, queue and payload
     * — in calls of at most STEPS_PER_CALL. Their job ids, in order.
     *
     * @param list<array{node: string, queue: string, payload: string}> $steps
     * @return list<int>
     */
    public function addSteps(int $wf, string $workflow, array $steps): array
    {
        $ids = [];
        foreach (array_chunk($steps, self::STEPS_PER_CALL) as $chunk) {
            $rows = $this->refused(fn () => $this->db->select(
                'SELECT t.id FROM unnest(drover.workflow_add_steps(?::bigint, ?::text[], ?::text[], ?::text[], NULL::smallint[], NULL::integer[]))
                     WITH ORDINALITY AS t(id, i) ORDER BY t.i',
                [
                    (string) $wf,
                    BrokerQuery::textArray(array_column($chunk, 'node')),
                    BrokerQuery::textArray(array_column($chunk, 'queue')),
                    BrokerQuery::textArray(array_column($chunk, 'payload')),
                ],
                false,
            ), $workflow);
            foreach ($rows as $row) {
                $ids[] = (int) $row->id;
            }
        }
        return $ids;
    }

    /** Starts top-level workflow $wf: its first steps reach drover.jobs when the caller's transaction commits. */
    public function start(int $wf, string $workflow): void
    {
        $this->refused(fn () => $this->db->select('SELECT drover.workflow_start(?::bigint)', [(string) $wf], false), $workflow);
    }

    /**
     * Sends signal $signal with $data (JSON, or null) to the workflows named $workflow that have
     * not ended (or to the workflow of that id, given as digits): how many took it.
     */
    public function signal(string $workflow, string $signal, ?string $data): int
    {
        return (int) $this->db->selectOne('SELECT drover.workflow_signal(?, ?, ?) AS n', [$workflow, $signal, $data], false)->n;
    }

    /**
     * Records $result (JSON) as step $job's, fenced by its lease $token, on this connection (so
     * inside the job's open transaction it commits with it): whether it was recorded (false: the
     * job no longer holds that lease, or is not a running step).
     */
    public function recordResult(int $job, int $token, string $result): bool
    {
        return (bool) $this->db->selectOne(
            'SELECT drover.workflow_record_result(?::bigint, ?::bigint, ?) AS recorded',
            [(string) $job, (string) $token, $result],
            false,
        )->recorded;
    }

    /**
     * The workflow job $job is a step of — its id (`wf`), name, node and member — or null when it
     * is none's.
     */
    public function of(int $job): ?object
    {
        return $this->db->selectOne('SELECT wf, name, node, member FROM drover.workflow_of(?::bigint)', [(string) $job], false);
    }

    /**
     * The results node $node of workflow $wf recorded (JSON), in member order; for a sub-workflow
     * node, its sub-workflow's steps'.
     *
     * @return list<string>
     */
    public function results(int $wf, string $node): array
    {
        return array_map(
            fn (object $row) => (string) $row->result,
            $this->db->select('SELECT result FROM drover.workflow_results(?::bigint, ?)', [(string) $wf, $node], false),
        );
    }

    /** The data (JSON) signal $signal was sent to workflow $wf with; null when it was not sent, or with none. */
    public function signalData(int $wf, string $signal): ?string
    {
        $data = $this->db->selectOne('SELECT drover.workflow_signal_data(?::bigint, ?) AS data', [(string) $wf, $signal], false)->data;
        return $data === null ? null : (string) $data;
    }

    /**
     * $run's result; the database's refusals of workflow $workflow as this package's exceptions:
     * a unique name running (DRW01) and a graph it cannot take (22023), its own words kept.
     *
     * @template T
     * @param callable(): T $run
     * @return T
     */
    private function refused(callable $run, string $workflow): mixed
    {
        try {
            return $run();
        } catch (QueryException $e) {
            $state = $e->errorInfo[0] ?? null;
            if ($state === WorkflowAlreadyRunning::SQLSTATE) {
                throw new WorkflowAlreadyRunning($workflow, $e);
            }
            if ($state === '22023') {
                $said = preg_match('/ERROR:\s+(.+?)(?:\n|$)/', (string) $e->getPrevious()?->getMessage(), $m) === 1 ? $m[1] : $e->getMessage();
                throw new InvalidWorkflow("drover: the database refused workflow \"$workflow\": $said", 0, $e);
            }
            throw $e;
        }
    }
}
