<?php
// PHPUnit bootstrap: Drover\ autoloading without Composer, Debian's packaged Laravel for the
// Laravel-facing classes, and a throwaway PostgreSQL for the tests that need one (started on first
// use, stopped at exit).
set_include_path('/usr/share/php' . PATH_SEPARATOR . get_include_path());
if (stream_resolve_include_path('Illuminate/autoload.php')) {
    require_once 'Illuminate/autoload.php';
}
require __DIR__ . '/../autoload.php';
require __DIR__ . '/PostgresServer.php';
