<?php

namespace App\Providers;

use Illuminate\Support\ServiceProvider;

/**
 * Code a test writes and edits while workers run, kept in the app's own storage (each test has its
 * own): classes `Scratch\NAME` load from `storage/scratch/NAME.php`, and `storage/scratch/boot.php`,
 * if present, is loaded at boot (as a provider or config file is). The fixture's app/ is shared by
 * every test and never edited.
 */
class ScratchServiceProvider extends ServiceProvider
{
    public function register(): void
    {
        $dir = storage_path('scratch');
        spl_autoload_register(function (string $class) use ($dir): void {
            if (str_starts_with($class, 'Scratch\\')) {
                $file = $dir . '/' . substr($class, strlen('Scratch\\')) . '.php';
                if (is_file($file)) {
                    require $file;
                }
            }
        });
        if (is_file("$dir/boot.php")) {
            require "$dir/boot.php";
        }
    }
}
