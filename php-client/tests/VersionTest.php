<?php

namespace Drover\Tests;

use Drover\Version;
use PHPUnit\Framework\TestCase;

/** Which binary a package works with: the same release or one apart (docs/upgrading.md). */
final class VersionTest extends TestCase
{
    public function testReleasesApartCountsMinorVersionsWithinAMajorOne(): void
    {
        $this->assertSame(0, Version::releasesApart('0.2.0', '0.2.3'));
        $this->assertSame(1, Version::releasesApart('0.1.0', '0.2.0'));
        $this->assertSame(1, Version::releasesApart('0.3.1', '0.2.0'));
        $this->assertSame(2, Version::releasesApart('0.1.0', '0.3.0'));
        $this->assertNull(Version::releasesApart('1.0.0', '0.9.0'));
        $this->assertNull(Version::releasesApart('dev', '0.2.0'));
        $this->assertSame(0, Version::releasesApart(Version::PACKAGE, Version::PACKAGE));
    }

    public function testTheScheduleIsHandedOnlyToABinaryThatRunsIt(): void
    {
        $dir = sys_get_temp_dir() . '/drover-version-test-' . getmypid();
        @mkdir($dir);
        $fake = function (int $schema) use ($dir): string {
            $path = "$dir/drover-$schema";
            file_put_contents($path, "#!/bin/sh\necho '{\"contract\":1,\"schema\":$schema,\"version\":\"0.2.0\"}'\n");
            chmod($path, 0755);
            return $path;
        };
        $this->assertTrue(\Drover\Console\MasterLaunch::binaryRunsSchedules($fake(12)));
        $this->assertTrue(\Drover\Console\MasterLaunch::binaryRunsSchedules(null), 'no binary: the launch says so itself');
        // A binary of the previous release (schema 11): refused the schedule, said on stderr.
        $this->assertFalse(\Drover\Console\MasterLaunch::binaryRunsSchedules($fake(11)));
        array_map('unlink', glob("$dir/*"));
        rmdir($dir);
    }
}
