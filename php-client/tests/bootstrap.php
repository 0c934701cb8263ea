<?php
// PHPUnit bootstrap: Drover\ autoloading without Composer, the Laravel the run is for, and a
// throwaway PostgreSQL for the tests that need one (started on first use, stopped at exit).
//
// DROVER_PHPUNIT_LARAVEL picks the Laravel: 8 (the default) is Debian's packaged framework under
// /usr/share/php; 12 is the vendor tree of the Laravel 12 fixture that tests/laravel12-app/build
// makes (target/laravel12-app, or DROVER_LARAVEL12_APP), autoloaded by its own Composer autoloader
// and nothing from /usr/share/php besides PHPUnit. Drover\ is always this checkout's php-client/.
require __DIR__ . '/../autoload.php';
$laravel = getenv('DROVER_PHPUNIT_LARAVEL') ?: '8';
if ($laravel === '12') {
    $root = dirname(__DIR__, 2);
    $app = getenv('DROVER_LARAVEL12_APP') ?: (getenv('CARGO_TARGET_DIR') ?: "$root/target") . '/laravel12-app';
    if (!is_file("$app/vendor/autoload.php")) {
        fwrite(STDERR, "php-client tests on Laravel 12: no vendor tree at $app/vendor; build it with `bash tests/laravel12-app/build` (from the repository root), or set DROVER_LARAVEL12_APP to a built one\n");
        exit(1);
    }
    require "$app/vendor/autoload.php";
    $version = \Illuminate\Foundation\Application::VERSION;
    if (!str_starts_with($version, '12.')) {
        fwrite(STDERR, "php-client tests on Laravel 12: $app/vendor has Laravel $version\n");
        exit(1);
    }
} elseif ($laravel === '8') {
    set_include_path('/usr/share/php' . PATH_SEPARATOR . get_include_path());
    if (!stream_resolve_include_path('Illuminate/autoload.php')) {
        fwrite(STDERR, "php-client tests on Laravel 8: Debian's php-laravel-framework is not installed (/usr/share/php/Illuminate); run scripts/setup\n");
        exit(1);
    }
    require_once 'Illuminate/autoload.php';
} else {
    fwrite(STDERR, "DROVER_PHPUNIT_LARAVEL must be 8 or 12, not $laravel\n");
    exit(1);
}
fwrite(STDERR, 'php-client tests on Laravel ' . \Illuminate\Foundation\Application::VERSION . "\n");
require __DIR__ . '/PostgresServer.php';
