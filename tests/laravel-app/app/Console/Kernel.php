<?php

namespace App\Console;

use Illuminate\Foundation\Console\Kernel as ConsoleKernel;

class Kernel extends ConsoleKernel
{
    // Listed explicitly: no Composer class map, no directory scan.
    protected $commands = [
        Commands\DispatchMatrix::class,
        Commands\ReportMatrix::class,
        Commands\DispatchDemo::class,
        Commands\DispatchBench::class,
        Commands\EvalCode::class,
        Commands\CapturePayloads::class,
    ];
}
