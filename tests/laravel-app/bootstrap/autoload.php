<?php
// Replaces Composer's vendor/autoload.php: Debian's packaged Laravel 8 under /usr/share/php, the
// drover/laravel package from this repository (php-client/), and App\ from app/.
set_include_path('/usr/share/php'.PATH_SEPARATOR.get_include_path());
require_once 'Illuminate/autoload.php';
require_once dirname(__DIR__, 3).'/php-client/autoload.php';

spl_autoload_register(static function (string $class): void {
    if (strncmp($class, 'App\\', 4) !== 0) {
        return;
    }
    $file = dirname(__DIR__).'/app/'.str_replace('\\', '/', substr($class, 4)).'.php';
    if (is_file($file)) {
        require $file;
    }
});
