<?php

// A console-only Laravel 8 application: the fixture drover's Laravel tests run against.
return [
    'name' => 'drover-fixture',
    'env' => env('APP_ENV', 'local'),
    'debug' => (bool) env('APP_DEBUG', false),
    'url' => 'http://localhost',
    'timezone' => 'UTC',
    'locale' => 'en',
    'fallback_locale' => 'en',
    // A fixed key, for the encrypted-job case; a test fixture's only secret.
    'key' => env('APP_KEY', 'base64:9wLMy0Lq0Qe6nW2wvp2vAz2yv0oQw3b+gHbd4Xl8iZs='),
    'cipher' => 'AES-256-CBC',
    // Listed explicitly: there is no Composer here to auto-discover Drover\DroverServiceProvider.
    'providers' => [
        Illuminate\Bus\BusServiceProvider::class,
        Illuminate\Cache\CacheServiceProvider::class,
        Illuminate\Foundation\Providers\ConsoleSupportServiceProvider::class,
        Illuminate\Database\DatabaseServiceProvider::class,
        Illuminate\Encryption\EncryptionServiceProvider::class,
        Illuminate\Filesystem\FilesystemServiceProvider::class,
        Illuminate\Queue\QueueServiceProvider::class,
        Illuminate\Redis\RedisServiceProvider::class,
        // For the dashboard (served by `php artisan serve` in its tests): views, sessions,
        // cookies, the gate (and what its guard needs) and the error pages' translations.
        Illuminate\View\ViewServiceProvider::class,
        Illuminate\Session\SessionServiceProvider::class,
        Illuminate\Cookie\CookieServiceProvider::class,
        Illuminate\Auth\AuthServiceProvider::class,
        Illuminate\Hashing\HashServiceProvider::class,
        Illuminate\Translation\TranslationServiceProvider::class,
        Drover\DroverServiceProvider::class,
        App\Providers\JournalServiceProvider::class,
        App\Providers\ForkFixtureServiceProvider::class,
        App\Providers\ScratchServiceProvider::class,
    ],
    'aliases' => [
        'Bus' => Illuminate\Support\Facades\Bus::class,
        'Cache' => Illuminate\Support\Facades\Cache::class,
        'DB' => Illuminate\Support\Facades\DB::class,
        'Queue' => Illuminate\Support\Facades\Queue::class,
        'Schema' => Illuminate\Support\Facades\Schema::class,
    ],
];
