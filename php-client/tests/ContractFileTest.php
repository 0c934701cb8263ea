<?php

namespace Drover\Tests;

use Drover\Console\ContractFile;
use Drover\Console\RootStart;
use PHPUnit\Framework\TestCase;

/**
 * The contract written where the master reads it, never through what another hand planted in
 * the state directory; and what `php artisan drover` does when started as root
 * (docs/security.md).
 */
final class ContractFileTest extends TestCase
{
    private string $dir;

    protected function setUp(): void
    {
        $this->dir = sys_get_temp_dir() . '/drover-contract-test-' . bin2hex(random_bytes(6));
        mkdir($this->dir, 0700);
    }

    protected function tearDown(): void
    {
        exec('rm -rf ' . escapeshellarg($this->dir));
    }

    public function testTheContractIsWrittenPrivatelyInADirectoryOfItsOwn(): void
    {
        $state = "$this->dir/storage/drover";
        $file = ContractFile::write($state, 'config.json', '{"version":1}');
        $this->assertSame("$state/config.json", $file);
        $this->assertSame('{"version":1}', file_get_contents($file));
        $this->assertSame(0600, fileperms($file) & 0777);
        $this->assertSame(0750, fileperms($state) & 0777);
        // Written again: replaced whole, no temporary file left.
        ContractFile::write($state, 'config.json', '{"version":2}');
        $this->assertSame('{"version":2}', file_get_contents($file));
        $this->assertSame(['config.json'], array_values(array_diff(scandir($state), ['.', '..'])));
    }

    public function testALinkPlantedWhereTheContractGoesIsRefusedByNameAndNeverWrittenThrough(): void
    {
        $state = "$this->dir/drover";
        mkdir($state, 0750);
        $victim = "$this->dir/victim";
        file_put_contents($victim, 'untouched');
        symlink($victim, "$state/config.json");
        $this->assertRefused(fn () => ContractFile::write($state, 'config.json', '{}'), "$state/config.json is a symbolic link");
        $this->assertSame('untouched', file_get_contents($victim));
    }

    public function testAFifoOrAnotherUsersFileWhereTheContractGoesIsRefusedByName(): void
    {
        $state = "$this->dir/drover";
        mkdir($state, 0750);
        posix_mkfifo("$state/config.json", 0600);
        $this->assertRefused(fn () => ContractFile::write($state, 'config.json', '{}'), "$state/config.json is a FIFO (named pipe)");
        unlink("$state/config.json");
        file_put_contents("$state/config.json", '{}');
        chown("$state/config.json", 'nobody');
        $this->assertRefused(fn () => ContractFile::write($state, 'config.json', '{}'), "$state/config.json is a file of uid " . posix_getpwnam('nobody')['uid']);
    }

    public function testAStateDirectoryThatIsALinkOrAnotherUsersIsRefused(): void
    {
        mkdir("$this->dir/elsewhere", 0750);
        symlink("$this->dir/elsewhere", "$this->dir/drover");
        $this->assertRefused(fn () => ContractFile::write("$this->dir/drover", 'config.json', '{}'), 'is a symbolic link, not a directory');
        $this->assertFileDoesNotExist("$this->dir/elsewhere/config.json");
        mkdir("$this->dir/theirs", 0750);
        chown("$this->dir/theirs", 'nobody');
        $this->assertRefused(fn () => ContractFile::write("$this->dir/theirs", 'config.json', '{}'), 'only the master\'s user may own it');
    }

    public function testRootHandsOverToTheConfiguredUserAndIsRefusedInProductionWithoutOne(): void
    {
        $this->assertSame(RootStart::GO_ON, RootStart::decide(33, null, 'production'));
        $this->assertSame(RootStart::GO_ON, RootStart::decide(33, 'www-data', 'production'));
        $this->assertSame(RootStart::BECOME_USER, RootStart::decide(0, 'www-data', 'local'));
        $this->assertSame(RootStart::BECOME_USER, RootStart::decide(0, 'www-data', 'production'));
        $this->assertSame(RootStart::GO_ON, RootStart::decide(0, null, 'local'), 'a laptop\'s sudo: warned');
        $this->assertSame(RootStart::REFUSE, RootStart::decide(0, null, 'production'));
        $this->assertSame(RootStart::REFUSE, RootStart::decide(0, 'root', 'production'));
        $this->assertSame(
            ['launch', '--user', 'www-data', '--app', '/var/www/app/current', '--php', '/usr/bin/php', '--', '--max-time', '60s'],
            RootStart::launchArguments('www-data', '/var/www/app/current', '/usr/bin/php', ['--max-time', '60s'])
        );
    }

    public function testRootHandsOverOnlyToABinaryThatHasLaunch(): void
    {
        $fake = function (int $schema): string {
            $path = "$this->dir/drover-$schema";
            file_put_contents($path, "#!/bin/sh\necho '{\"contract\":1,\"schema\":$schema,\"version\":\"0.2.0\"}'\n");
            chmod($path, 0755);
            return $path;
        };
        $this->assertTrue(RootStart::binaryLaunches($fake(RootStart::LAUNCH_SCHEMA)));
        $this->assertFalse(RootStart::binaryLaunches($fake(10)), 'drover 0.2.0: no launch; root goes on as before');
        $this->assertStringContainsString('without `drover launch`', RootStart::olderBinary('/usr/bin/drover', 'www-data'));
    }

    private function assertRefused(callable $write, string $naming): void
    {
        try {
            $write();
        } catch (\RuntimeException $e) {
            $this->assertStringContainsString($naming, $e->getMessage());
            return;
        }
        $this->fail("not refused: $naming");
    }
}
