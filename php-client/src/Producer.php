<?php

namespace Drover;

/**
 * Enqueues jobs through the caller's own PDO connection, with the driver's own statements
 * (Queue\JobStatement), so an enqueue inside the caller's transaction commits or rolls back with
 * it. The master is woken by the
 * insert trigger's NOTIFY, which PostgreSQL delivers on commit only.
 */
final class Producer
{
    public function __construct(private readonly \PDO $pdo)
    {
    }

    /**
     * @param string   $payload      opaque to drover; the worker's handler decodes it
     * @param float    $delaySeconds not available before this many seconds after the insert, by the
     *                               database's clock (the master compares with that clock too)
     * @param int|null $maxAttempts  null = no limit
     * @return int the job's id
     */
    public function enqueue(string $payload, string $queue = 'default', float $delaySeconds = 0, ?int $maxAttempts = null, int $priority = 0): int
    {
        return $this->enqueueMany([$payload], $queue, $delaySeconds, $maxAttempts, $priority)[0];
    }

    /**
     * One job of an ordered group (docs/ordered-groups.md), deduplicated by $deduplicationId
     * when given: it runs after every job of $group enqueued (committed) before it has settled for
     * good. In the caller's transaction, like every enqueue.
     *
     * @param bool $hold a failure for good stops the group until the job is retried or forgotten
     * @return int|null the job's id; null when $deduplicationId was enqueued on this queue within
     *                  $dedupWindowSeconds, and the job was dropped
     */
    public function enqueueGrouped(string $payload, ?string $group, string $queue = 'default', float $delaySeconds = 0, ?int $maxAttempts = null, int $priority = 0, bool $hold = false, ?string $deduplicationId = null, int $dedupWindowSeconds = 300): ?int
    {
        foreach (['group' => $group, 'deduplication id' => $deduplicationId] as $what => $id) {
            if ($id !== null && ($id === '' || mb_strlen($id) > Queue\GroupOptions::MAX_ID_LENGTH)) {
                throw new \InvalidArgumentException("drover: a $what must be 1 to " . Queue\GroupOptions::MAX_ID_LENGTH . ' characters, got ' . mb_strlen($id));
            }
        }
        if ($maxAttempts !== null && $maxAttempts < 1) {
            throw new \InvalidArgumentException("drover: maxAttempts must be null or at least 1, got $maxAttempts");
        }
        if ($dedupWindowSeconds < 1) {
            throw new \InvalidArgumentException("drover: dedupWindowSeconds must be at least 1, got $dedupWindowSeconds");
        }
        return $this->selectId(
            Queue\JobStatement::enqueue(async: false),
            [$queue, $payload, $delaySeconds, $group, $hold ? 'true' : 'false', $deduplicationId, $dedupWindowSeconds, $priority, $maxAttempts],
        );
    }

    /**
     * One enqueue function's call, its id returned (null: deduplicated). Unprepared, as one round
     * trip: a transaction pooler cannot lose a statement it never kept.
     *
     * @param list<mixed> $params
     */
    private function selectId(string $sql, array $params): ?int
    {
        $statement = $this->pdo->prepare($sql, [\PDO::PGSQL_ATTR_DISABLE_PREPARES => true]);
        if ($statement === false || !$statement->execute($params)) {
            $info = $statement === false ? $this->pdo->errorInfo() : $statement->errorInfo();
            throw new \RuntimeException('drover: enqueue failed: ' . ($info[2] ?? 'unknown error') . ' (has `drover migrate` run on this database?)');
        }
        $id = $statement->fetchColumn();
        return $id === null ? null : (int) $id;
    }

    /**
     * One job under limits (docs/limits.md): each a `Middleware\LimitConcurrency` (at most N of
     * its key out at once, across every queue, worker and master) or a `Middleware\LimitRate` (at
     * most N of its key started per window); this one waits, without a claim or an attempt, until
     * it has taken every one. In ordered group $group when given (as enqueueGrouped, with $hold):
     * it takes its limits once it is its group's head. Deduplicated by $deduplicationId when
     * given, as enqueueGrouped does. In the caller's transaction, like every enqueue.
     *
     * @param non-empty-list<Middleware\LimitConcurrency|Middleware\LimitRate> $limits
     * @return int|null the job's id; null when $deduplicationId dropped it
     */
    public function enqueueLimited(string $payload, array $limits, string $queue = 'default', float $delaySeconds = 0, ?int $maxAttempts = null, int $priority = 0, ?string $deduplicationId = null, int $dedupWindowSeconds = 300, ?string $group = null, bool $hold = false): ?int
    {
        $taken = Queue\JobLimits::ofMiddleware(array_values($limits), 'Drover\\Producer::enqueueLimited');
        if ($taken === null || count($limits) !== count(array_filter($limits, fn ($l) => $l instanceof Middleware\LimitConcurrency || $l instanceof Middleware\LimitRate))) {
            throw new \InvalidArgumentException('drover: enqueueLimited takes a non-empty list of LimitConcurrency and LimitRate');
        }
        foreach (['group' => $group, 'deduplication id' => $deduplicationId] as $what => $id) {
            if ($id !== null && ($id === '' || mb_strlen($id) > Queue\GroupOptions::MAX_ID_LENGTH)) {
                throw new \InvalidArgumentException("drover: a $what must be 1 to " . Queue\GroupOptions::MAX_ID_LENGTH . ' characters, got ' . mb_strlen($id));
            }
        }
        if ($maxAttempts !== null && $maxAttempts < 1) {
            throw new \InvalidArgumentException("drover: maxAttempts must be null or at least 1, got $maxAttempts");
        }
        if ($dedupWindowSeconds < 1) {
            throw new \InvalidArgumentException("drover: dedupWindowSeconds must be at least 1, got $dedupWindowSeconds");
        }
        return $this->selectId(
            Queue\JobStatement::enqueueLimited(async: false),
            [$queue, $payload, $delaySeconds, ...$taken->bindings(), $deduplicationId, $dedupWindowSeconds, $priority, $maxAttempts, null, 1, $group, $hold ? 'true' : 'false'],
        );
    }

    /**
     * One job of key $key on a fair queue (docs/limits.md, "Fair share"): it takes $key's turn
     * (a $weight of 2 takes twice the turns of 1), so a key with a long backlog does not delay
     * the others. The queue must be declared fair (`fair` in config/drover.php, `drover run
     * --fair`) for its claims to take the turns. Deduplicated by $deduplicationId when given.
     *
     * @return int|null the job's id; null when $deduplicationId dropped it
     */
    public function enqueueFair(string $payload, string $key, string $queue = 'default', float $delaySeconds = 0, ?int $maxAttempts = null, int $priority = 0, float $weight = 1, ?string $deduplicationId = null, int $dedupWindowSeconds = 300): ?int
    {
        if (mb_strlen($key) > Queue\FairShare::MAX_KEY_LENGTH || !($weight > 0) || $weight > Queue\FairShare::MAX_WEIGHT) {
            throw new \InvalidArgumentException('drover: a fair key is at most ' . Queue\FairShare::MAX_KEY_LENGTH . ' characters and a weight above 0 and at most ' . Queue\FairShare::MAX_WEIGHT . ', got ' . mb_strlen($key) . " characters and $weight");
        }
        if ($maxAttempts !== null && $maxAttempts < 1) {
            throw new \InvalidArgumentException("drover: maxAttempts must be null or at least 1, got $maxAttempts");
        }
        return $this->selectId(
            Queue\JobStatement::enqueueFair(async: false),
            [$queue, $payload, $delaySeconds, $key, $weight, $deduplicationId, $dedupWindowSeconds, $priority, $maxAttempts],
        );
    }

    /**
     * Many jobs in one statement.
     *
     * @param list<string> $payloads
     * @return list<int> their ids, in order
     */
    public function enqueueMany(array $payloads, string $queue = 'default', float $delaySeconds = 0, ?int $maxAttempts = null, int $priority = 0): array
    {
        if ($payloads === []) {
            return [];
        }
        if ($maxAttempts !== null && $maxAttempts < 1) {
            throw new \InvalidArgumentException("drover: maxAttempts must be null or at least 1, got $maxAttempts");
        }
        if (count($payloads) > Queue\JobStatement::ROWS_PER_STATEMENT) {
            $ids = [];
            foreach (array_chunk($payloads, Queue\JobStatement::ROWS_PER_STATEMENT) as $chunk) {
                array_push($ids, ...$this->enqueueMany($chunk, $queue, $delaySeconds, $maxAttempts, $priority));
            }
            return $ids;
        }
        $sql = Queue\JobStatement::insert(count($payloads), async: false, returning: true, withRules: true);
        $params = [];
        foreach ($payloads as $payload) {
            array_push($params, $queue, $payload, $delaySeconds, $priority, $maxAttempts);
        }
        // Unprepared (one round trip, an unnamed statement): safe through a transaction pooler.
        $statement = $this->pdo->prepare($sql, [\PDO::PGSQL_ATTR_DISABLE_PREPARES => true]);
        if ($statement === false || !$statement->execute($params)) {
            $info = $statement === false ? $this->pdo->errorInfo() : $statement->errorInfo();
            throw new \RuntimeException('drover: enqueue failed: ' . ($info[2] ?? 'unknown error') . ' (has `drover migrate` run on this database?)');
        }
        return array_map('intval', $statement->fetchAll(\PDO::FETCH_COLUMN));
    }
}
