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
}
