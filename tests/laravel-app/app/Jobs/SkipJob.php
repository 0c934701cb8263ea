<?php

namespace App\Jobs;

use App\Jobs\Middleware\SkipStandIn;
use Illuminate\Queue\Middleware\Skip;

/**
 * Laravel 11's Skip middleware: `Skip::when($skip)` leaves handle() unrun and the job processed.
 * On Laravel 8 (no Skip) the fixture's line-for-line stand-in runs instead; matrix:dispatch
 * journals which.
 */
class SkipJob extends MatrixJob
{
    public function __construct(string $label, public bool $skip)
    {
        parent::__construct($label);
    }

    public static function middlewareInUse(): string
    {
        return class_exists(Skip::class) ? 'uses_laravels_skip' : 'skip_absent_on_this_laravel_uses_a_stand_in';
    }

    public function middleware()
    {
        return [class_exists(Skip::class) ? Skip::when($this->skip) : new SkipStandIn($this->skip)];
    }

    protected function run(int $attempt): void
    {
    }
}
