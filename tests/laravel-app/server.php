<?php

// `php artisan serve` on Laravel 8 runs PHP's built-in server with this router: files under
// public/ as they are, everything else through public/index.php.
$uri = urldecode(parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH) ?? '/');
if ($uri !== '/' && file_exists(__DIR__ . '/public' . $uri)) {
    return false;
}
require_once __DIR__ . '/public/index.php';
