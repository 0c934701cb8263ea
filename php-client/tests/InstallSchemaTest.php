<?php

namespace Drover\Tests;

use Drover\Console\InstallCommand;
use Drover\Schema\SchemaMigrator;
use Drover\Schema\SchemaWindow;
use Drover\Version;
use Illuminate\Config\Repository;
use Illuminate\Console\OutputStyle;
use Illuminate\Foundation\Application;
use PHPUnit\Framework\TestCase;
use Symfony\Component\Console\Input\ArrayInput;
use Symfony\Component\Console\Output\BufferedOutput;

/**
 * `php artisan drover:install` checks the schema: the binary's (`drover version --json`) against
 * this package's migrations and against what the database recorded — whether this binary runs on
 * that database, and the fix when not. A real PostgreSQL, fake binaries that answer `version
 * --json` as a drover of each schema does.
 */
final class InstallSchemaTest extends TestCase
{
    private string $dir;

    private \PDO $admin;

    protected function setUp(): void
    {
        $this->dir = sys_get_temp_dir() . '/drover-install-schema-' . getmypid();
        @mkdir($this->dir);
        $server = PostgresServer::get();
        $this->admin = new \PDO("pgsql:host={$server->socketDir()};dbname=postgres;user=drover");
        $this->admin->exec('DROP DATABASE IF EXISTS drover_install');
        $this->admin->exec('CREATE DATABASE drover_install');
    }

    protected function tearDown(): void
    {
        \Illuminate\Support\Facades\Facade::clearResolvedInstances();
        \Illuminate\Container\Container::setInstance(null);
        $this->admin->exec('DROP DATABASE IF EXISTS drover_install WITH (FORCE)');
        array_map('unlink', glob("$this->dir/*") ?: []);
        @rmdir($this->dir);
    }

    public function testTheVerdictOfEachSchemaOnADatabase(): void
    {
        $said = SchemaMigrator::saidReaders();
        $latest = SchemaMigrator::latest();
        $this->assertSame([SchemaWindow::ABSENT, []], SchemaWindow::of($latest, [], $said));
        $this->assertSame([SchemaWindow::SAME, []], SchemaWindow::of($latest, $said, $said));
        $this->assertSame([SchemaWindow::MIGRATES, []], SchemaWindow::of($latest, array_slice($said, 0, 10, true), $said));
        // drover 0.2.0 (schema 10) on this release's schema: the window.
        $this->assertSame([SchemaWindow::RUNS, []], SchemaWindow::of(10, $said, $said));
        // As a migrator of before issue 57 recorded 0013: this package's migrate corrects it.
        $this->assertSame([SchemaWindow::CORRECTED, [13]], SchemaWindow::of(10, [13 => 12] + $said, $said));
        // Two releases ahead.
        $this->assertSame([SchemaWindow::REFUSED, [$latest + 1]], SchemaWindow::of($latest, $said + [$latest + 1 => null], $said));
        $this->assertSame([SchemaWindow::REFUSED, [13, 15, 16]], SchemaWindow::of(9, $said, $said), 'older than the window: 0013, 0015 and 0016 let schema 10 on, no older');
    }

    public function testTheBinaryIsComparedWithTheSchemaTheDatabaseHas(): void
    {
        $latest = SchemaMigrator::latest();
        $app = $this->app();
        $migrator = new SchemaMigrator($app['db']->connection());

        [$ok, $said] = $this->check($app, $this->binary($latest));
        $this->assertTrue($ok, $said);
        $this->assertStringContainsString("schema: the binary's $latest is this package's", $said);
        $this->assertStringContainsString("drover's schema is not in this database yet: `php artisan migrate` creates it", $said);

        $migrator->migrate();
        [$ok, $said] = $this->check($app, $this->binary($latest));
        $this->assertTrue($ok, $said);
        $this->assertStringContainsString("the database is at schema $latest (binaries and packages of schema 10 or newer run on it): this binary (schema $latest) runs on it", $said);

        // A binary of drover 0.2.0 (schema 10), on the database this release migrated.
        [$ok, $said] = $this->check($app, $this->binary(10));
        $this->assertTrue($ok, $said);
        $this->assertStringContainsString("the binary needs 10, this package migrates to $latest, and each migration above 10 lets the binary run on it", $said);
        $this->assertStringContainsString('this binary (schema 10) runs on it, as in a rolling upgrade', $said);

        // The same, where 0013 was recorded as a migrator of before issue 57 recorded it.
        $app['db']->connection()->update('UPDATE drover.schema_migrations SET oldest_reader = 12 WHERE version = 13');
        [$ok, $said] = $this->check($app, $this->binary(10));
        $this->assertFalse($ok, $said);
        $this->assertStringContainsString('it records migration(s) 0013 as needing a newer drover than this binary (schema 10), stricter than this package\'s migrations say: run `php artisan migrate`', $said);
        $migrator->migrate();
        [$ok, $said] = $this->check($app, $this->binary(10));
        $this->assertTrue($ok, $said);

        // A database a drover two releases ahead migrated.
        $app['db']->connection()->insert('INSERT INTO drover.schema_migrations (version, name) VALUES (?, ?)', [$latest + 1, 'from_the_future']);
        [$ok, $said] = $this->check($app, $this->binary($latest));
        $this->assertFalse($ok, $said);
        $this->assertStringContainsString(sprintf('the database is at schema %d (binaries and packages of schema %d or newer run on it), and migration(s) %04d need a newer drover than this binary (schema %d): a master would be refused at start (exit 78). Install the drover binary of the version that migrated it, or newer', $latest + 1, $latest + 1, $latest + 1, $latest), $said);
        $app['db']->connection()->disconnect();
    }

    public function testABinaryThatThisPackagesMigrationsWouldRefuseIsNamed(): void
    {
        $app = $this->app();
        [$ok, $said] = $this->check($app, $this->binary(9));
        $this->assertFalse($ok, $said);
        $this->assertStringContainsString('migration(s) 0013, 0015, 0016 need a newer binary: once `php artisan migrate` runs, a master of this binary is refused at start', $said);
        $app['db']->connection()->disconnect();
    }

    /** A fake drover binary of this package's version and contract that needs schema $schema. */
    private function binary(int $schema): string
    {
        $path = "$this->dir/drover-$schema";
        file_put_contents($path, sprintf("#!/bin/sh\necho '{\"contract\":1,\"schema\":%d,\"version\":\"%s\"}'\n", $schema, Version::PACKAGE));
        chmod($path, 0755);
        return $path;
    }

    /** drover:install's check of the binary: (its verdict, what it printed). */
    private function check(Application $app, string $binary): array
    {
        $app['config']->set('drover.binary', $binary);
        $command = new InstallCommand();
        $command->setLaravel($app);
        $output = new BufferedOutput();
        $command->setOutput(new OutputStyle(new ArrayInput([]), $output));
        $ok = $command->checkBinary();
        return [$ok, $output->fetch()];
    }

    /** An application whose default connection is the test database drover_install. */
    private function app(): Application
    {
        $server = PostgresServer::get();
        $app = new Application($this->dir);
        $app->instance('config', new Repository([
            'database' => [
                'default' => 'pgsql',
                'connections' => ['pgsql' => [
                    'driver' => 'pgsql', 'host' => $server->socketDir(), 'database' => 'drover_install', 'username' => 'drover',
                    'password' => '', 'charset' => 'utf8', 'prefix' => '', 'schema' => 'public', 'search_path' => 'public',
                ]],
            ],
            'drover' => ['database' => null, 'binary' => null],
        ]));
        $app->register(\Illuminate\Database\DatabaseServiceProvider::class);
        \Illuminate\Container\Container::setInstance($app);
        $app->boot();
        return $app;
    }
}
