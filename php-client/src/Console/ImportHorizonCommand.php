<?php

namespace Drover\Console;

use Drover\Config\HorizonImporter;
use Drover\Config\ImportFile;
use Drover\Config\InvalidConfig;
use Drover\Config\Pools;
use Illuminate\Console\Command;

/**
 * `php artisan drover:import-horizon`: writes config/drover.php from config/horizon.php, so an
 * application leaving Horizon keeps its supervisors, environments and limits. HorizonImporter
 * does the conversion; this command finds the files, names everything that was not carried over,
 * checks the written file the way `php artisan drover` will read it, and never overwrites an
 * existing config/drover.php unless told to.
 */
class ImportHorizonCommand extends Command
{
    protected $signature = 'drover:import-horizon
        {--path= : config/horizon.php to read (default the app\'s)}
        {--force : overwrite an existing config/drover.php}
        {--dry-run : print instead of writing}';

    protected $description = 'Write config/drover.php from config/horizon.php (supervisors, environments, limits)';

    public function handle(): int
    {
        $horizon = $this->horizonConfig();
        if ($horizon === null) {
            return 1;
        }
        [$config, $source] = $horizon;
        $target = $this->laravel->configPath('drover.php');
        $dryRun = (bool) $this->option('dry-run');
        if (!$dryRun && !$this->option('force') && file_exists($target)) {
            $this->error("drover:import-horizon: $target already exists; pass --force to overwrite it, or --dry-run to print the import instead");
            return 1;
        }

        $import = new HorizonImporter($config, (array) ($this->laravel['config']['queue.connections'] ?? []));
        if ($import->problems() !== []) {
            foreach ($import->problems() as $problem) {
                $this->error($problem);
            }
            $this->error("drover:import-horizon: nothing written. Fix these values in $source (or in a copy passed with --path) and run it again.");
            return 1;
        }
        $php = $import->render(date('Y-m-d'), $source);

        // The file itself, evaluated as Laravel will load it (env(), storage_path()), must pass
        // drover's checks for every environment it names, before it replaces anything.
        $dir = $dryRun ? sys_get_temp_dir() : dirname($target);
        if (!is_dir($dir) && !@mkdir($dir, 0755, true)) {
            $this->error("drover:import-horizon: cannot create $dir");
            return 1;
        }
        // A private file of a random name, created exclusively: a path another user planted
        // (a symlink, their own PHP) is neither followed nor loaded (ImportFile).
        try {
            $tmp = ImportFile::create($dir, $php);
        } catch (\RuntimeException $e) {
            $this->error('drover:import-horizon: ' . $e->getMessage());
            return 1;
        }
        try {
            $problem = $this->check($tmp);
            if ($problem !== null) {
                $this->error("drover:import-horizon: the imported configuration does not pass drover's checks, nothing written (please report this with your config/horizon.php): $problem");
                return 1;
            }
            if ($dryRun) {
                $this->getOutput()->write($php);
                return 0;
            }
            if (!ImportFile::moveTo($tmp, $target)) {
                $this->error("drover:import-horizon: cannot write $target");
                return 1;
            }
        } finally {
            @unlink($tmp);
        }

        $this->info("drover:import-horizon: wrote $target from $source");
        foreach ($import->notCarriedOver() as $line) {
            $this->warn("not carried over: $line");
        }
        foreach ($import->remarks() as $line) {
            $this->line("note: $line");
        }
        $this->nextSteps($import);
        return 0;
    }

    /**
     * Horizon's configuration and what to call it: --path's file, else the application's loaded
     * config('horizon') (Horizon installed: env() already applied), else config/horizon.php
     * required here (it may call env() and Str::slug, which Laravel provides). Null when there is
     * none, after saying so.
     *
     * @return array{0: array<string, mixed>, 1: string}|null
     */
    private function horizonConfig(): ?array
    {
        $path = (string) $this->option('path');
        if ($path === '') {
            $loaded = $this->laravel['config']['horizon'] ?? null;
            if (is_array($loaded) && $loaded !== []) {
                return [$loaded, 'config/horizon.php'];
            }
            $path = $this->laravel->configPath('horizon.php');
        }
        if (!is_file($path)) {
            $this->error("drover:import-horizon: $path does not exist and config('horizon') is not loaded; pass --path=/path/to/horizon.php");
            return null;
        }
        try {
            $config = (static fn (string $file) => require $file)($path);
        } catch (\Throwable $e) {
            $this->error("drover:import-horizon: $path failed to load: " . get_class($e) . ': ' . $e->getMessage());
            return null;
        }
        if (!is_array($config)) {
            $this->error("drover:import-horizon: $path does not return an array (it returns " . get_debug_type($config) . ')');
            return null;
        }
        return [$config, $path];
    }

    /** The written file loaded, then resolved for every environment it names; the first problem, or null. */
    private function check(string $file): ?string
    {
        try {
            $config = (static fn (string $f) => require $f)($file);
            foreach (array_keys($config['environments'] ?? []) as $entry) {
                $entry = (string) $entry;
                Pools::entry($config, $entry);
                if (!str_contains($entry, '*') && Pools::matchedEnvironment($config, $entry) === $entry) {
                    Pools::resolve($config, $entry);
                }
            }
        } catch (InvalidConfig $e) {
            return implode('; ', $e->problems);
        } catch (\Throwable $e) {
            return get_class($e) . ': ' . $e->getMessage();
        }
        return null;
    }

    /** What the application still has to change, from its own queue configuration. */
    private function nextSteps(HorizonImporter $import): void
    {
        $environments = array_map('strval', array_keys($import->environments()));
        $current = $this->laravel->environment();
        $config = ['defaults' => $import->defaults(), 'environments' => $import->environments()];
        $entry = Pools::matchedEnvironment($config, $current);
        $this->line('environments: ' . ($environments === [] ? 'none' : implode(', ', $environments)) . '; an environment no entry matches runs no workers'
            . ($entry === null ? " (this one, '$current', runs none)" : " (this one, '$current', runs " . (implode(', ', array_keys(Pools::entry($config, $entry))) ?: 'no pool') . ')'));
        if (!is_array($this->laravel['config']['queue.connections.drover'] ?? null)) {
            $this->warn("next: config/queue.php has no drover connection; add 'drover' => ['driver' => 'drover', 'connection' => 'pgsql', 'queue' => 'default'] (connection: your PostgreSQL connection)");
        }
        $default = $this->laravel['config']['queue.default'] ?? null;
        if ($default !== 'drover') {
            $this->warn('next: set QUEUE_CONNECTION=drover (now: ' . ($default ?? 'none') . '), so jobs are pushed to drover');
        }
        $this->line('next: stop Horizon once its queues are drained, then run `php artisan drover` (docs/migrating-from-horizon.md walks through the switch)');
    }
}
