<?php

namespace Drover;

/**
 * What this package is, for `php artisan drover:install` to compare with the drover binary it
 * finds (`drover version --json`). A test keeps PACKAGE equal to the binary's Cargo.toml version.
 */
final class Version
{
    /** drover/laravel's version; the binary of the same version is the one it was tested with. */
    public const PACKAGE = '0.1.0';
}
