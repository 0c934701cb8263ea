<?php

namespace Drover\Failed;

use Illuminate\Database\ConnectionInterface;
use Illuminate\Queue\Failed\FailedJobProviderInterface;

/**
 * The application's failer (`queue.failer`), unchanged, except that forgetting a failed job that
 * holds an ordered group lets the group go on (docs/ordered-groups.md, "hold"): `queue:forget`,
 * `queue:flush`, `queue:prune-failed` and the dashboard's forget button all go through the failer.
 * (`queue:retry` needs nothing here: the retried payload carries the held job's uuid, and
 * drover.enqueue puts it first.) Every other call is the failer's own.
 */
class ReleasingHeldGroups implements FailedJobProviderInterface
{
    public function __construct(
        /** The failer the application configured. */
        protected FailedJobProviderInterface $failer,
        /** Resolves drover's database connection when a group must be let go (lazily: most calls never need it). */
        protected \Closure $database,
    ) {
    }

    /** The failer, and the prunable one when the application's failer can prune. */
    public static function wrap(FailedJobProviderInterface $failer, \Closure $database): FailedJobProviderInterface
    {
        if ($failer instanceof self) {
            return $failer;
        }
        return interface_exists(\Illuminate\Queue\Failed\PrunableFailedJobProvider::class)
            && $failer instanceof \Illuminate\Queue\Failed\PrunableFailedJobProvider
            ? new PrunableReleasingHeldGroups($failer, $database)
            : new self($failer, $database);
    }

    public function log($connection, $queue, $payload, $exception)
    {
        return $this->failer->log($connection, $queue, $payload, $exception);
    }

    public function ids($queue = null)
    {
        return $this->failer->ids($queue);
    }

    public function all()
    {
        return $this->failer->all();
    }

    public function find($id)
    {
        return $this->failer->find($id);
    }

    public function forget($id)
    {
        $uuid = self::uuidOf($this->failer->find($id));
        $forgotten = $this->failer->forget($id);
        if ($forgotten && $uuid !== null) {
            $this->letGo($uuid);
        }
        return $forgotten;
    }

    public function flush($hours = null)
    {
        $held = $this->heldSince($hours);
        $this->failer->flush(...func_get_args());
        foreach ($held as $uuid) {
            $this->letGo($uuid);
        }
    }

    public function __call($method, $arguments)
    {
        return $this->failer->{$method}(...$arguments);
    }

    /** The Laravel uuid of a failed job as a failer returns it, if it has one. */
    protected static function uuidOf(mixed $job): ?string
    {
        $job = is_array($job) ? (object) $job : $job;
        if (!is_object($job)) {
            return null;
        }
        if (isset($job->uuid) && is_string($job->uuid)) {
            return $job->uuid;
        }
        $payload = isset($job->payload) && is_string($job->payload) ? json_decode($job->payload, true) : null;
        return is_array($payload) && isset($payload['uuid']) && is_string($payload['uuid']) ? $payload['uuid'] : null;
    }

    /**
     * The uuids of the jobs that hold groups and failed more than $hours ago (all of them for
     * null): what a flush of those hours deletes.
     *
     * @return list<string>
     */
    protected function heldSince(?int $hours): array
    {
        $rows = $this->withoutSchema(fn () => $this->db()->select(
            'SELECT DISTINCT held_uuid FROM drover.groups WHERE head IS NULL AND held_uuid IS NOT NULL'
            . ($hours === null ? '' : ' AND held_at < now() - make_interval(hours => ?)'),
            $hours === null ? [] : [$hours],
        )) ?? [];
        return array_map(fn ($row) => (string) $row->held_uuid, $rows);
    }

    /** The group(s) held by this failed job go on (drover.forget_held). */
    protected function letGo(string $uuid): void
    {
        $this->withoutSchema(fn () => $this->db()->select('SELECT drover.forget_held(?) AS n', [$uuid]));
    }

    /**
     * Runs $query; on a database where drover's schema (or its groups, before migration 5) does
     * not exist there is no held group, and Laravel's command goes on as without drover: null.
     */
    protected function withoutSchema(\Closure $query): mixed
    {
        try {
            return $query();
        } catch (\Illuminate\Database\QueryException $e) {
            // 42P01 undefined table, 3F000 undefined schema, 42883 undefined function.
            if (in_array((string) $e->getCode(), ['42P01', '3F000', '42883'], true)) {
                return null;
            }
            throw $e;
        }
    }

    protected function db(): ConnectionInterface
    {
        return ($this->database)();
    }
}
