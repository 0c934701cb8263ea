<?php

namespace Drover\Schema;

/**
 * Whether a drover of one schema runs on a database, from the migrations the database recorded
 * (`drover.schema_migrations`: each applied version and the oldest schema it lets run on it) —
 * the rule the binary applies when a master starts (broker/src/migrate.rs) and this package's
 * migrator applies (SchemaMigrator), in words for `php artisan drover:install`.
 */
final class SchemaWindow
{
    /** drover's schema is not in the database yet. */
    public const ABSENT = 'absent';

    /** The database is at this schema. */
    public const SAME = 'same';

    /** The database is older: the missing migrations are applied (a master with auto_migrate, `php artisan migrate`, `drover migrate`). */
    public const MIGRATES = 'migrates';

    /** The database is newer, and every newer migration lets this schema run on it (a rolling upgrade). */
    public const RUNS = 'runs';

    /**
     * The database is newer and a newer migration's recorded oldest reader refuses this schema,
     * but only because the record is stricter than this package's file says: this package's
     * `php artisan migrate` corrects it (SchemaMigrator::staleReaders), and then it runs.
     */
    public const CORRECTED = 'corrected';

    /** The database is newer and a newer migration needs a newer drover. */
    public const REFUSED = 'refused';

    /**
     * What a drover of schema $schema does on a database with $done applied.
     *
     * @param array<int, ?int> $done applied version => its recorded oldest reader
     * @param array<int, ?int> $said this package's migrations => what each file says
     * @return array{0: string, 1: list<int>} the verdict, and the migrations that refuse $schema
     *                                         (for CORRECTED and REFUSED)
     */
    public static function of(int $schema, array $done, array $said): array
    {
        if ($done === []) {
            return [self::ABSENT, []];
        }
        $found = max(array_keys($done));
        if ($found === $schema) {
            return [self::SAME, []];
        }
        if ($found < $schema) {
            return [self::MIGRATES, []];
        }
        $blocking = SchemaMigrator::blockingNewer($done, $schema);
        if ($blocking === []) {
            return [self::RUNS, []];
        }
        $corrected = SchemaMigrator::staleReaders($done, $said) + $done;
        return [SchemaMigrator::blockingNewer($corrected, $schema) === [] ? self::CORRECTED : self::REFUSED, $blocking];
    }

    /**
     * One line on what the drover binary of schema $schema does on this database, and whether it
     * can run there (false: it would be refused at start).
     *
     * @param array<int, ?int> $done applied version => its recorded oldest reader
     * @param array<int, ?int> $said this package's migrations => what each file says
     * @return array{0: bool, 1: string}
     */
    public static function binaryLine(int $schema, array $done, array $said): array
    {
        [$verdict, $blocking] = self::of($schema, $done, $said);
        $found = $done === [] ? 0 : max(array_keys($done));
        $names = implode(', ', array_map(fn (int $v) => sprintf('%04d', $v), $blocking));
        $window = $done === [] ? '' : sprintf(' (binaries and packages of schema %d or newer run on it)', SchemaMigrator::oldestRunnable($done));
        return match ($verdict) {
            self::ABSENT => [true, "drover's schema is not in this database yet: `php artisan migrate` creates it (schema " . SchemaMigrator::latest() . ')'],
            self::SAME => [true, "the database is at schema $found$window: this binary (schema $schema) runs on it"],
            self::MIGRATES => [true, "the database is at schema $found, older than this binary's $schema: a starting master applies the missing migrations (auto_migrate), or `php artisan migrate` does (with auto_migrate off, before the master starts)"],
            self::RUNS => [true, "the database is at schema $found$window: this binary (schema $schema) runs on it, as in a rolling upgrade; upgrade it to the version that migrated it when the fleet is done"],
            self::CORRECTED => [false, "the database is at schema $found, and it records migration(s) $names as needing a newer drover than this binary (schema $schema), stricter than this package's migrations say: run `php artisan migrate` (it corrects the record), then this binary runs on it"],
            default => [false, "the database is at schema $found$window, and migration(s) $names need a newer drover than this binary (schema $schema): a master would be refused at start (exit 78). Install the drover binary of the version that migrated it, or newer (docs/upgrading.md)"],
        };
    }
}
