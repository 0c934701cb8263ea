<?php

namespace Drover\Schema;

use Illuminate\Database\ConnectionInterface;

/**
 * Applies drover's schema migrations through a Laravel connection: the same SQL files the drover
 * binary embeds (`broker/migrations/NNNN_name.sql` of this package), recorded in the same
 * `drover.schema_migrations` table under the same advisory lock, so `php artisan migrate`,
 * `drover migrate` and a starting master never disagree or race. A schema newer than this package
 * knows is refused by name, unless each newer migration says this schema may run on it (its first
 * line, `-- oldest reader: N`: the window of a rolling upgrade, docs/upgrading.md).
 */
final class SchemaMigrator
{
    /** The binary's advisory lock key ("drover" in ASCII): both migrate under it. */
    public const LOCK_KEY = 0x64726f766572;

    public function __construct(
        /** The connection that holds drover's schema (drover.database). */
        private readonly ConnectionInterface $db,
        /** Where the SQL files are; the package's own by default. */
        private readonly ?string $directory = null,
    ) {
    }

    /** The package's own migration files (the binary embeds the same). */
    public static function directory(): string
    {
        return dirname(__DIR__, 3) . '/broker/migrations';
    }

    /** The grants of drover's least-privilege roles, as the binary applies them after migrating. */
    public static function grants(): string
    {
        return dirname(__DIR__, 3) . '/broker/roles/grants.sql';
    }

    /**
     * The migration files, by version.
     *
     * @return array<int, array{0: string, 1: string}> version => [name, path]
     */
    public static function files(?string $directory = null): array
    {
        $dir = $directory ?? self::directory();
        $found = [];
        foreach (glob("$dir/*.sql") ?: [] as $path) {
            if (!preg_match('/^(\d{4})_([a-z0-9_]+)\.sql$/', basename($path), $m)) {
                throw new \RuntimeException("drover: unexpected file $path among the schema migrations (expected NNNN_name.sql)");
            }
            $found[(int) $m[1]] = [$m[2], $path];
        }
        if ($found === []) {
            throw new \RuntimeException("drover: no schema migrations in $dir; the package is incomplete (reinstall drover/laravel)");
        }
        ksort($found);
        return $found;
    }

    /** The oldest schema that may run with migration $sql applied (its first line), or null. */
    public static function oldestReader(string $sql): ?int
    {
        $first = strtok($sql, "\n");
        return is_string($first) && preg_match('/^-- oldest reader:\s*(\d+)\s*$/', $first, $m) ? (int) $m[1] : null;
    }

    /**
     * The newer migrations that need a newer package: those above $known whose oldest reader is
     * unknown or above it.
     *
     * @param array<int, ?int> $done applied version => its oldest reader
     * @return list<int>
     */
    public static function blockingNewer(array $done, int $known): array
    {
        $blocking = [];
        foreach ($done as $version => $reader) {
            if ($version > $known && ($reader === null || $reader > $known)) {
                $blocking[] = $version;
            }
        }
        sort($blocking);
        return $blocking;
    }

    /**
     * The oldest schema whose binary or package may run on a database with these migrations
     * applied: the oldest $schema for which blockingNewer() finds nothing.
     *
     * @param array<int, ?int> $done applied version => its oldest reader
     */
    public static function oldestRunnable(array $done): int
    {
        if ($done === []) {
            return 0;
        }
        $oldest = max(array_keys($done));
        while ($oldest > 0 && self::blockingNewer($done, $oldest - 1) === []) {
            $oldest--;
        }
        return $oldest;
    }

    /**
     * The applied migrations of this package whose recorded oldest reader is stricter than the
     * migration's first line says now (or not recorded): a header corrected after the migration
     * was applied somewhere (0013 said 12 until issue 57 found that drover 0.2.0, schema 10, runs
     * on it). Every binary and package reads the recorded value — an older one cannot read this
     * package's files — so the migrators correct it; only ever lowered, never raised (as the
     * binary does, broker/src/migrate.rs).
     *
     * @param array<int, ?int> $done applied version => its recorded oldest reader
     * @param array<int, ?int> $said this package's version => what its file says
     * @return array<int, int> version => the oldest reader to record
     */
    public static function staleReaders(array $done, array $said): array
    {
        $stale = [];
        foreach ($said as $version => $reader) {
            if ($reader !== null && array_key_exists($version, $done) && ($done[$version] === null || $done[$version] > $reader)) {
                $stale[$version] = $reader;
            }
        }
        return $stale;
    }

    /**
     * What this package's migration files say of their oldest reader.
     *
     * @return array<int, ?int> version => oldest reader
     */
    public static function saidReaders(?string $directory = null): array
    {
        $said = [];
        foreach (self::files($directory) as $version => [, $path]) {
            $said[$version] = self::oldestReader((string) file_get_contents($path));
        }
        return $said;
    }

    /**
     * The applied migrations with their recorded oldest reader (none when drover's schema does
     * not exist yet).
     *
     * @return array<int, ?int> version => oldest reader
     */
    public function appliedReaders(): array
    {
        $exists = $this->db->selectOne("SELECT to_regclass('drover.schema_migrations') IS NOT NULL AS e")->e;
        if (!$exists) {
            return [];
        }
        $column = $this->db->selectOne("SELECT count(*) AS n FROM pg_attribute WHERE attrelid = 'drover.schema_migrations'::regclass AND attname = 'oldest_reader' AND NOT attisdropped")->n;
        $readers = [];
        $rows = (int) $column > 0
            ? $this->db->select('SELECT version, oldest_reader FROM drover.schema_migrations ORDER BY version')
            : $this->db->select('SELECT version, NULL AS oldest_reader FROM drover.schema_migrations ORDER BY version');
        foreach ($rows as $row) {
            $readers[(int) $row->version] = $row->oldest_reader === null ? null : (int) $row->oldest_reader;
        }
        return $readers;
    }

    /**
     * Whether drover's schema was created in this database (its `drover.schema_migrations`
     * table exists): a `php artisan migrate` then brings it up to date
     * (MigrateDroverSchemaAfterMigrate).
     */
    public function created(): bool
    {
        $exists = $this->db->selectOne("SELECT to_regclass('drover.schema_migrations') IS NOT NULL AS present");
        return (bool) ($exists->present ?? false);
    }

    /** The schema version this package needs: its newest migration. */
    public static function latest(?string $directory = null): int
    {
        return (int) array_key_last(self::files($directory));
    }

    /** @return list<int> the versions applied to the database */
    public function applied(): array
    {
        $exists = $this->db->selectOne("SELECT to_regclass('drover.schema_migrations') IS NOT NULL AS e")->e;
        if (!$exists) {
            return [];
        }
        return array_map(fn ($r) => (int) $r->version, $this->db->select('SELECT version FROM drover.schema_migrations ORDER BY version'));
    }

    /**
     * Applies every missing migration; returns the names applied.
     *
     * A step such as `ALTER TABLE drover.jobs` needs an exclusive lock for a moment, and every
     * claim, settle and enqueue queues behind it while it waits: behind a long transaction that
     * read drover.jobs (a report, a pg_dump, a session idle in a transaction), the queue would
     * stop for as long. So each try waits at most $lockWaitMs for a lock, rolls back (nothing is
     * half-applied) and tries again after a pause (1 s, doubling up to 8 s), $tries times in all,
     * then fails naming the cause — as the binary does (broker/src/migrate.rs, LockWait).
     */
    public function migrate(int $lockWaitMs = 5000, int $tries = 6, int $pauseMs = 1000): array
    {
        for ($attempt = 1; ; $attempt++) {
            try {
                return $this->migrateOnce($lockWaitMs);
            } catch (\Illuminate\Database\QueryException $e) {
                if (($e->errorInfo[0] ?? null) !== '55P03') {
                    throw $e;
                }
                if ($attempt >= $tries) {
                    throw new \RuntimeException(sprintf(
                        "drover: drover's migrations could not take a lock on drover's tables in %d tries of %d ms: a long transaction holds one (a report, a pg_dump, a session idle in a transaction: see pg_stat_activity and pg_locks for drover.jobs). End it and migrate again; a migration that waited longer would stop every claim behind it",
                        $tries,
                        $lockWaitMs,
                    ), 0, $e);
                }
                usleep($pauseMs * 1000);
                $pauseMs = min($pauseMs * 2, 8000);
            }
        }
    }

    /** One try of migrate(), its lock waits bounded by $lockWaitMs. */
    private function migrateOnce(int $lockWaitMs): array
    {
        $migrations = self::files($this->directory);
        return $this->db->transaction(function () use ($migrations, $lockWaitMs) {
            // Held to the end of this transaction; the binary takes the same key the same way.
            $this->db->select('SELECT pg_advisory_xact_lock(?)', [self::LOCK_KEY]);
            // From here, no lock on a table is waited for longer than this.
            $this->db->unprepared(sprintf('SET LOCAL lock_timeout = %d', max(1, $lockWaitMs)));
            $this->db->unprepared('CREATE SCHEMA IF NOT EXISTS drover;
                CREATE TABLE IF NOT EXISTS drover.schema_migrations (
                    version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());
                ALTER TABLE drover.schema_migrations ADD COLUMN IF NOT EXISTS oldest_reader integer');
            $readers = [];
            foreach ($this->db->select('SELECT version, oldest_reader FROM drover.schema_migrations') as $row) {
                $readers[(int) $row->version] = $row->oldest_reader === null ? null : (int) $row->oldest_reader;
            }
            $done = array_keys($readers);
            $known = (int) array_key_last($migrations);
            $blocking = self::blockingNewer($readers, $known);
            if ($blocking !== []) {
                throw new \RuntimeException(sprintf(
                    'drover: drover\'s schema in this database is at version %d, newer than drover/laravel %s knows (%d), and migration(s) %s need a newer package: a drover more than one release newer migrated it; upgrade drover/laravel and the drover binary to that version (docs/upgrading.md)',
                    max($done),
                    \Drover\Version::PACKAGE,
                    $known,
                    implode(', ', array_map(fn ($v) => sprintf('%04d', $v), $blocking)),
                ));
            }
            // A header this package corrected since the migration was applied (staleReaders).
            foreach (self::staleReaders($readers, self::saidReaders($this->directory)) as $version => $reader) {
                $this->db->update('UPDATE drover.schema_migrations SET oldest_reader = ? WHERE version = ?', [$reader, $version]);
            }
            $applied = [];
            foreach ($migrations as $version => [$name, $path]) {
                if (in_array($version, $done, true)) {
                    continue;
                }
                $sql = (string) file_get_contents($path);
                $this->db->unprepared($sql);
                $this->db->insert('INSERT INTO drover.schema_migrations (version, name, oldest_reader) VALUES (?, ?, ?)', [$version, $name, self::oldestReader($sql)]);
                $applied[] = sprintf('%04d_%s', $version, $name);
            }
            // Whoever migrates owns the schema: drover's roles that exist get their rights on
            // what this release added (a no-op without them; docs/postgres-roles.md).
            $this->db->unprepared((string) file_get_contents(self::grants()));
            return $applied;
        });
    }

    /**
     * Drops drover's schema, refusing while it holds jobs: a rollback must not lose them.
     */
    public function drop(): void
    {
        $this->db->transaction(function () {
            $this->db->select('SELECT pg_advisory_xact_lock(?)', [self::LOCK_KEY]);
            $jobs = $this->db->selectOne("SELECT CASE WHEN to_regclass('drover.jobs') IS NULL THEN 0 ELSE (SELECT count(*) FROM drover.jobs) END AS n")->n;
            if ((int) $jobs > 0) {
                throw new \RuntimeException("drover: drover.jobs still holds $jobs job(s); rolling back drover's schema would lose them. Let the workers drain the queue (or move the jobs), then roll back again");
            }
            $this->db->unprepared('DROP SCHEMA IF EXISTS drover CASCADE');
        });
    }
}
