<?php
// PSR-4 autoloading of Drover\ for installations without Composer (Debian's packages, the tests).
// With Composer, vendor/autoload.php does the same from composer.json.
spl_autoload_register(static function (string $class): void {
    if (strncmp($class, 'Drover\\', 7) !== 0) {
        return;
    }
    $file = __DIR__ . '/src/' . str_replace('\\', '/', substr($class, 7)) . '.php';
    if (is_file($file)) {
        require $file;
    }
});
