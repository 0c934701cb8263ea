<?php

namespace Drover\Tests;

use Drover\Schema\SchemaMigrator;
use PHPUnit\Framework\TestCase;

/** The schema's window for a rolling upgrade, in the package's words (the binary has the same rule). */
final class SchemaMigratorTest extends TestCase
{
    public function testAMigrationNamesTheOldestSchemaThatMayRunOnItOnItsFirstLine(): void
    {
        $this->assertSame(7, SchemaMigrator::oldestReader("-- oldest reader: 7\nALTER TABLE x;"));
        $this->assertSame(12, SchemaMigrator::oldestReader('-- oldest reader:12'));
        $this->assertNull(SchemaMigrator::oldestReader("ALTER TABLE x;\n-- oldest reader: 7"));
        $this->assertNull(SchemaMigrator::oldestReader('-- oldest reader: seven'));
        $this->assertNull(SchemaMigrator::oldestReader(''));
        // Every migration from 0008 on says it, and names an older schema than its own.
        foreach (SchemaMigrator::files() as $version => [$name, $path]) {
            if ($version >= 8) {
                $reader = SchemaMigrator::oldestReader((string) file_get_contents($path));
                $this->assertNotNull($reader, "$version $name");
                $this->assertLessThan($version, $reader, "$version $name");
            }
        }
    }

    public function testAMigrationBehindALongTransactionGivesUpByNameAndAppliesOnceItEnds(): void
    {
        $server = PostgresServer::get();
        $admin = new \PDO("pgsql:host={$server->socketDir()};dbname=postgres;user=drover");
        $admin->exec('DROP DATABASE IF EXISTS drover_locks');
        $admin->exec('CREATE DATABASE drover_locks');
        $capsule = new \Illuminate\Database\Capsule\Manager();
        $capsule->addConnection(['driver' => 'pgsql', 'host' => $server->socketDir(), 'database' => 'drover_locks', 'username' => 'drover', 'password' => '', 'charset' => 'utf8', 'prefix' => '', 'schema' => 'public']);
        $db = $capsule->getConnection();
        $migrator = new SchemaMigrator($db);
        $migrator->migrate();
        // Back to schema 10: migration 0011 undone.
        $db->unprepared((string) file_get_contents(__DIR__ . '/../../broker/tests/fixtures/undo_migration_0011.sql'));
        // A report that read drover.jobs in a transaction it keeps open.
        $reader = new \PDO("pgsql:host={$server->socketDir()};dbname=drover_locks;user=drover");
        $reader->exec('BEGIN');
        $reader->query('SELECT count(*) FROM drover.jobs')->fetchAll();
        $started = microtime(true);
        try {
            $migrator->migrate(200, 3, 50);
            $this->fail('expected the migration to give up');
        } catch (\RuntimeException $e) {
            $this->assertStringContainsString("could not take a lock on drover's tables in 3 tries of 200 ms", $e->getMessage());
        }
        $this->assertLessThan(5.0, microtime(true) - $started, 'three bounded tries');
        $this->assertSame(10, (int) $db->selectOne('SELECT max(version) AS v FROM drover.schema_migrations')->v, 'nothing half-applied');
        $reader->exec('COMMIT');
        $this->assertSame(['0011_limits', '0012_schedule', '0013_roles', '0014_console', '0015_exactly_once', '0016_workflows'], $migrator->migrate(200, 3, 50));
        $db->disconnect();
        $reader = null;
        $admin->exec('DROP DATABASE drover_locks');
    }

    public function testAStricterRecordedOldestReaderIsCorrectedToWhatTheFileSaysAndNeverRaised(): void
    {
        $said = SchemaMigrator::saidReaders();
        $this->assertSame(10, $said[13], '0013: drover 0.2.0 (schema 10) runs on it');
        $this->assertSame([], SchemaMigrator::staleReaders($said, $said));
        $strict = [13 => 12] + $said;
        $this->assertSame([13 => 10], SchemaMigrator::staleReaders($strict, $said));
        $this->assertSame([13 => 10], SchemaMigrator::staleReaders([13 => null] + $said, $said), 'not recorded');
        $this->assertSame([], SchemaMigrator::staleReaders([13 => 7] + $said, $said), 'looser: left alone');
        $this->assertSame([], SchemaMigrator::staleReaders([1 => null, 99 => 99], $said), 'not applied, or not this package\'s');
        // The window: every schema from 0.2.0's on runs drover 0.2.0.
        $this->assertSame(10, SchemaMigrator::oldestRunnable($said));
        $this->assertSame(12, SchemaMigrator::oldestRunnable($strict));
        $this->assertSame(0, SchemaMigrator::oldestRunnable([]));
    }

    public function testMigrateCorrectsAStricterRecordedOldestReaderOfAnAppliedMigration(): void
    {
        $server = PostgresServer::get();
        $admin = new \PDO("pgsql:host={$server->socketDir()};dbname=postgres;user=drover");
        $admin->exec('DROP DATABASE IF EXISTS drover_readers');
        $admin->exec('CREATE DATABASE drover_readers');
        $capsule = new \Illuminate\Database\Capsule\Manager();
        $capsule->addConnection(['driver' => 'pgsql', 'host' => $server->socketDir(), 'database' => 'drover_readers', 'username' => 'drover', 'password' => '', 'charset' => 'utf8', 'prefix' => '', 'schema' => 'public']);
        $db = $capsule->getConnection();
        $migrator = new SchemaMigrator($db);
        $this->assertSame([], $migrator->appliedReaders(), 'no schema yet');
        $migrator->migrate();
        // As a migrator of before issue 57 recorded 0013.
        $db->update('UPDATE drover.schema_migrations SET oldest_reader = 12 WHERE version = 13');
        $this->assertSame(12, SchemaMigrator::oldestRunnable($migrator->appliedReaders()), 'drover 0.2.0 refused');
        $this->assertSame([], $migrator->migrate(), 'nothing to apply');
        $this->assertSame(10, $migrator->appliedReaders()[13]);
        $this->assertSame(10, SchemaMigrator::oldestRunnable($migrator->appliedReaders()), 'drover 0.2.0 runs on it');
        $db->disconnect();
        $admin->exec('DROP DATABASE drover_readers');
    }

    public function testANewerSchemaBlocksOnlyWhereANewerMigrationNeedsANewerPackage(): void
    {
        $known = SchemaMigrator::latest();
        [$next, $after] = [$known + 1, $known + 2];
        $this->assertSame([], SchemaMigrator::blockingNewer([1 => null, $known => 7], $known));
        $this->assertSame([], SchemaMigrator::blockingNewer([1 => null, $next => $known], $known), 'one expand-only step ahead');
        $this->assertSame([$next], SchemaMigrator::blockingNewer([1 => null, $next => null], $known), 'said nothing');
        $this->assertSame([$after], SchemaMigrator::blockingNewer([$next => $known, $after => $next], $known), 'two releases ahead');
    }
}
