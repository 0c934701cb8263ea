<?php

namespace Drover\Listeners;

use Drover\Config\Embedded;
use Drover\Schema\SchemaMigrator;
use Illuminate\Contracts\Foundation\Application;

/**
 * `php artisan migrate` keeps drover's schema at this package's version on upgrades too.
 *
 * drover's schema is applied by one published Laravel migration (`drover:install`), which Laravel
 * runs once: after a package upgrade that brings new drover migrations, `php artisan migrate`
 * says "Nothing to migrate" and the schema stays where it was (found by the rolling-upgrade run:
 * a 0.2 package over a 0.1 schema then refused `drover:pause` for a missing migration 0008). So
 * when a `migrate` run ends — with or without migrations of its own — this applies drover's
 * missing migrations through the same SchemaMigrator, on drover's connection, provided drover's
 * schema was created already (a fresh install goes through the published migration, in its
 * place among the application's). Nothing for the embedded cluster, whose master applies its own
 * schema, nor for a rollback or a --pretend run.
 */
final class MigrateDroverSchemaAfterMigrate
{
    public function __construct(private readonly Application $app)
    {
    }

    /** @param \Illuminate\Database\Events\MigrationsEnded|\Illuminate\Database\Events\NoPendingMigrations $event */
    public function __invoke(object $event): void
    {
        if (($event->method ?? 'up') !== 'up' || (($event->options ?? [])['pretend'] ?? false)) {
            return;
        }
        $name = $this->app['config']['drover.database'] ?: null;
        if (Embedded::wanted($this->app, $name)) {
            return;
        }
        $db = $this->app['db']->connection($name);
        if ($db->getDriverName() !== 'pgsql') {
            // Not a connection drover can use (drover names that when it runs): nothing of
            // drover's to migrate here, and the application's own migrate must not fail for it.
            return;
        }
        $migrator = new SchemaMigrator($db);
        if (!$migrator->created()) {
            return;
        }
        $applied = $migrator->migrate();
        if ($applied !== [] && $this->app->runningInConsole()) {
            fwrite(STDOUT, 'drover: applied ' . implode(', ', $applied) . " to drover's schema (this package's version)\n");
        }
    }
}
