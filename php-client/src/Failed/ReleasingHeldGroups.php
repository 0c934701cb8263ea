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
        $held = $this->heldByFailedJobs();
        $forgotten = $this->failer->forget($id);
        $this->releaseGroupsOfDeleted($held);
        return $forgotten;
    }

    public function flush($hours = null)
    {
        $held = $this->heldByFailedJobs();
        $this->failer->flush(...func_get_args());
        $this->releaseGroupsOfDeleted($held);
    }

    public function __call($method, $arguments)
    {
        return $this->failer->{$method}(...$arguments);
    }

    /**
     * The uuids of the jobs that hold groups and are in this failer now. A group held by a job the
     * failer never had (a plain producer's, or one drover failed into drover.failed_jobs) is not
     * this failer's to release. Held groups are few: one query, then one lookup each.
     *
     * @return list<string>
     */
    protected function heldByFailedJobs(): array
    {
        // drover.held_uuids() (migration 0013) for a role that may not read drover.groups (a
        // producer's, docs/postgres-roles.md); the table itself on an older schema.
        $rows = $this->withoutSchema(fn () => $this->db()->select('SELECT held_uuid FROM drover.held_uuids() AS held_uuid'))
            ?? $this->withoutSchema(fn () => $this->db()->select(
                'SELECT DISTINCT held_uuid FROM drover.groups WHERE head IS NULL AND held_uuid IS NOT NULL'
            )) ?? [];
        return array_values(array_filter(
            array_map(fn ($row) => (string) $row->held_uuid, $rows),
            fn (string $uuid) => $this->stillFailed($uuid),
        ));
    }

    /**
     * Of the held groups' jobs that were in the failer before a deletion, those now gone let their
     * groups go on (drover.forget_held). Asked of the failer itself after the deletion rather than
     * predicted from ids or times, so a group goes on exactly when its job is gone, whatever the
     * deletion's own rules (a flush's hours, a prune's cut-off to the second).
     *
     * @param list<string> $held
     */
    protected function releaseGroupsOfDeleted(array $held): void
    {
        foreach ($held as $uuid) {
            if (!$this->stillFailed($uuid)) {
                // drover.release_held (migration 0013) with the owner's rights; forget_held on
                // an older schema.
                $this->withoutSchema(fn () => $this->db()->select('SELECT drover.release_held(?) AS n', [$uuid]))
                    ?? $this->db()->select('SELECT drover.forget_held(?) AS n', [$uuid]);
            }
        }
    }

    /**
     * Whether the failer still holds the failed job with this uuid. Laravel's database failers are
     * asked by their `uuid` column (the plain `database` one finds by its integer id); any other
     * failer by find(), which takes the uuid.
     */
    protected function stillFailed(string $uuid): bool
    {
        $config = (array) config('queue.failed', []);
        if (in_array($config['driver'] ?? null, ['database', 'database-uuids'], true)) {
            return app('db')->connection($config['database'] ?? null)
                ->table($config['table'] ?? 'failed_jobs')
                ->where('uuid', $uuid)
                ->exists();
        }
        return $this->failer->find($uuid) !== null;
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
