<?php

namespace Drover\Tests;

use Drover\Config\AppPath;
use Drover\Config\Exporter;
use Drover\Config\InvalidConfig;
use PHPUnit\Framework\TestCase;

/** The application's path as the service names it (a `current` symlink), never the release. */
final class AppPathTest extends TestCase
{
    private string $site;

    protected function setUp(): void
    {
        $this->site = sys_get_temp_dir() . '/drover-apppath-' . bin2hex(random_bytes(4));
        mkdir("$this->site/releases/41", 0777, true);
        symlink('releases/41', "$this->site/current");
    }

    protected function tearDown(): void
    {
        unlink("$this->site/current");
        rmdir("$this->site/releases/41");
        rmdir("$this->site/releases");
        rmdir($this->site);
    }

    private function base(): string
    {
        return realpath("$this->site/releases/41");
    }

    public function testTheAbsoluteArtisanPathIsKeptAsGiven(): void
    {
        $this->assertSame("$this->site/current", AppPath::detect($this->base(), null, "$this->site/current/artisan", null));
    }

    public function testARelativeArtisanIsTakenFromTheShellsWorkingDirectory(): void
    {
        $this->assertSame("$this->site/current", AppPath::detect($this->base(), null, 'artisan', "$this->site/current"));
        $this->assertSame("$this->site/current", AppPath::detect($this->base(), null, './artisan', "$this->site/current/."));
    }

    public function testACandidateThatIsNotThisApplicationIsIgnored(): void
    {
        mkdir("$this->site/other");
        try {
            $this->assertSame($this->base(), AppPath::detect($this->base(), null, 'artisan', "$this->site/other"));
            $this->assertSame($this->base(), AppPath::detect($this->base(), null, null, null));
        } finally {
            rmdir("$this->site/other");
        }
    }

    public function testTheConfiguredPathWinsAndMustBeThisApplication(): void
    {
        $this->assertSame("$this->site/current", AppPath::detect($this->base(), "$this->site/current/", '/elsewhere/artisan', null));
        $this->expectException(InvalidConfig::class);
        $this->expectExceptionMessage('drover.app_path (DROVER_APP_PATH) is /nonexistent');
        AppPath::detect($this->base(), '/nonexistent', null, null);
    }

    public function testPathsInsideTheReleaseAreRebasedOntoTheAppPath(): void
    {
        $current = "$this->site/current";
        $this->assertSame("$current/storage/drover", AppPath::rebase($this->base() . '/storage/drover', $this->base(), $current));
        $this->assertSame($current, AppPath::rebase($this->base(), $this->base(), $current));
        $this->assertSame('/run/drover', AppPath::rebase('/run/drover', $this->base(), $current));
        $this->assertSame($this->base() . '41', AppPath::rebase($this->base() . '41', $this->base(), $current), 'a sibling with the same prefix is not inside');
    }

    public function testTheContractNamesTheAppPathForWorkersReloadsAndState(): void
    {
        $current = "$this->site/current";
        $config = ['state_dir' => $this->base() . '/storage/drover', 'defaults' => ['default' => []], 'environments' => ['*' => ['default' => []]]];
        $contract = Exporter::contract($config, 'production', '/usr/bin/php8.2', $this->base() . '/artisan', $this->base(), $current);
        $this->assertSame($current, $contract['cwd']);
        $this->assertSame("$current/storage/drover", $contract['state_dir']);
        $this->assertSame(['/usr/bin/php8.2', "$current/artisan", 'drover', '--export'], $contract['reload_command']);
        $this->assertSame($current, $contract['pools'][0]['cwd']);
        $this->assertSame("$current/artisan", $contract['pools'][0]['command'][1]);
    }
}
