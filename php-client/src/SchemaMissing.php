<?php

namespace Drover;

/**
 * A dispatch found no drover schema in the database: told as what to run, instead of
 * `relation "drover.jobs" does not exist`. The job was not queued (the dispatch throws, as any
 * failed dispatch does).
 */
final class SchemaMissing extends \RuntimeException
{
    /** SQLSTATEs of a missing table (42P01) or schema (3F000). */
    private const STATES = ['42P01', '3F000'];

    /** `$e` itself unless it says drover's schema is missing. */
    public static function explain(\Throwable $e, string $connection): \Throwable
    {
        $state = $e instanceof \PDOException ? ($e->errorInfo[0] ?? $e->getCode()) : $e->getCode();
        if (!in_array((string) $state, self::STATES, true) || !str_contains($e->getMessage(), 'drover')) {
            return $e;
        }
        return new self(
            "drover: the table drover.jobs does not exist in the database of connection $connection, so the job was not queued. "
            . 'Create drover\'s schema: `php artisan drover:install` then `php artisan migrate` (or `drover migrate`); the master also creates it when it starts.',
            0,
            $e,
        );
    }
}
