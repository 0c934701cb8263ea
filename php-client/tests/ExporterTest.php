<?php

namespace Drover\Tests;

use Drover\Config\Exporter;
use Drover\Config\InvalidConfig;
use PHPUnit\Framework\TestCase;

/** The master's database connection string, from the application's own connection. */
final class ExporterTest extends TestCase
{
    public function testTlsSettingsOfTheConnectionReachTheMaster(): void
    {
        $url = Exporter::databaseUrl('pgsql', [
            'driver' => 'pgsql', 'host' => 'db.example.com', 'port' => 5432, 'database' => 'app',
            'username' => 'app', 'password' => "it's secret", 'sslmode' => 'verify-full',
            'sslrootcert' => '/etc/ssl/certs/rds-global-bundle.pem', 'sslcert' => '/etc/app/client.crt', 'sslkey' => '/etc/app/client.key',
        ]);
        $this->assertSame(
            "host='db.example.com' port='5432' dbname='app' user='app' password='it\\'s secret' sslmode='verify-full' sslrootcert='/etc/ssl/certs/rds-global-bundle.pem' sslcert='/etc/app/client.crt' sslkey='/etc/app/client.key'",
            $url,
        );
    }

    public function testUnsetTlsSettingsAreLeftToTheMastersDefault(): void
    {
        $url = Exporter::databaseUrl('pgsql', ['driver' => 'pgsql', 'host' => '10.0.0.1', 'database' => 'app', 'username' => 'app']);
        $this->assertSame("host='10.0.0.1' port='5432' dbname='app' user='app'", $url);
    }

    public function testEveryHostOfAnArrayIsAFailoverListForTheMaster(): void
    {
        $url = Exporter::databaseUrl('pgsql', ['driver' => 'pgsql', 'host' => ['10.0.0.1', '10.0.0.2'], 'database' => 'app', 'username' => 'app']);
        $this->assertSame("host='10.0.0.1,10.0.0.2' port='5432' dbname='app' user='app'", $url);
        $url = Exporter::databaseUrl('pgsql', ['driver' => 'pgsql', 'write' => ['host' => ['a.db', 'b.db']], 'database' => 'app']);
        $this->assertStringStartsWith("host='a.db,b.db' port='5432'", $url);
    }

    public function testTheWriteSideOfASplitConnectionIsUsed(): void
    {
        $url = Exporter::databaseUrl('pgsql', ['driver' => 'pgsql', 'read' => ['host' => 'replica'], 'write' => ['host' => 'primary'], 'database' => 'app', 'username' => 'app', 'sslmode' => 'require']);
        $this->assertStringStartsWith("host='primary'", $url);
        $this->assertStringContainsString("sslmode='require'", $url);
    }

    public function testANonPostgresConnectionIsRefusedByName(): void
    {
        $this->expectException(InvalidConfig::class);
        $this->expectExceptionMessage('database connection mysql uses driver mysql; drover needs PostgreSQL (pgsql)');
        Exporter::databaseUrl('mysql', ['driver' => 'mysql']);
    }
}
