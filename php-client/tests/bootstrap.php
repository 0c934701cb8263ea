<?php
// PHPUnit bootstrap: Drover\ autoloading without Composer, and a throwaway PostgreSQL for the tests
// that need one (started on first use, stopped at exit).
require __DIR__ . '/../autoload.php';
require __DIR__ . '/PostgresServer.php';
