<?php

use Illuminate\Console\Scheduling\Schedule;
use Illuminate\Foundation\Application;
use Illuminate\Foundation\Configuration\Exceptions;
use Illuminate\Foundation\Configuration\Middleware;

// The Laravel 12 fixture: the reference skeleton's console application with the fixture's jobs and
// commands (app/ is tests/laravel-app/app) and drover/laravel installed by Composer.
$app = Application::configure(basePath: dirname(__DIR__))
    ->withCommands([__DIR__.'/../app/Console/Commands'])
    ->withMiddleware(function (Middleware $middleware): void {
        //
    })
    ->withExceptions(function (Exceptions $exceptions): void {
        //
    })
    // The scheduler's tests' schedule (empty unless DROVER_TEST_SCHEDULE is set).
    ->withSchedule(function (Schedule $schedule): void {
        App\Console\TestSchedule::define($schedule);
    })->create();

// Tests give each run its own storage (cache, locks, logs) so runs side by side do not meet.
if ($storage = getenv('APP_STORAGE')) {
    $app->useStoragePath($storage);
}

return $app;
