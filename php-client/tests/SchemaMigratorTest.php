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
