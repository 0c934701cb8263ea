<?php

namespace Drover;

/**
 * What this package is, for `php artisan drover:install` to compare with the drover binary it
 * finds (`drover version --json`). A test keeps PACKAGE equal to the binary's Cargo.toml version.
 */
final class Version
{
    /** drover/laravel's version; the binary of the same version is the one it was tested with. */
    public const PACKAGE = '0.2.0';

    /**
     * How many releases apart two versions are (their minor versions, 0.x being pre-1.0), or
     * null when their major versions differ. A binary and a package one release apart work
     * together during a rolling upgrade (docs/upgrading.md); further apart they do not.
     */
    public static function releasesApart(string $a, string $b): ?int
    {
        $parse = static fn (string $v): ?array => preg_match('/^(\d+)\.(\d+)\.\d+/', $v, $m) ? [(int) $m[1], (int) $m[2]] : null;
        [$x, $y] = [$parse($a), $parse($b)];
        if ($x === null || $y === null || $x[0] !== $y[0]) {
            return null;
        }
        return abs($x[1] - $y[1]);
    }
}
