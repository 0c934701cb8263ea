<?php

// drover/laravel's provider is not listed: Composer's package discovery registers it, as it does
// in an application that ran `composer require drover/laravel`.
return [
    App\Providers\JournalServiceProvider::class,
    App\Providers\ForkFixtureServiceProvider::class,
    App\Providers\ScratchServiceProvider::class,
];
