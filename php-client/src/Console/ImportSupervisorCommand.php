<?php

namespace Drover\Console;

use Drover\Config\ImportFile;
use Drover\Config\InvalidConfig;
use Drover\Config\Pools;
use Drover\Config\SupervisorImporter;
use Illuminate\Console\Command;

/**
 * `php artisan drover:import-supervisor FILE…`: writes config/drover.php from supervisord's
 * program files (Forge's, or the Laravel docs' `queue:work` programs), so an application leaving
 * queue:work under supervisord keeps its workers, queues and limits. SupervisorImporter does the
 * conversion; this command names everything that was not carried over and every program skipped,
 * checks the written file the way `php artisan drover` will read it, and never overwrites an
 * existing config/drover.php unless told to — as drover:import-horizon does.
 */
class ImportSupervisorCommand extends Command
{
    /** Where Debian and Ubuntu (and so Forge) keep supervisord's program files. */
    private const DEFAULT_FILES = '/etc/supervisor/conf.d/*.conf';

    protected $signature = 'drover:import-supervisor
        {files?* : supervisord files with the queue:work programs (default: ' . self::DEFAULT_FILES . ')}
        {--connection=* : import only the programs working these queue connections (default: every one)}
        {--directory= : when the files run several applications\' workers, the directory of the one to import}
        {--force : overwrite an existing config/drover.php}
        {--dry-run : print instead of writing}';

    protected $description = 'Write config/drover.php from supervisord\'s queue:work programs (processes, queues, limits)';

    public function handle(): int
    {
        $files = array_values(array_filter((array) $this->argument('files'), fn ($f) => $f !== ''));
        if ($files === []) {
            $files = glob(self::DEFAULT_FILES) ?: [];
            if ($files === []) {
                $this->error('drover:import-supervisor: no files given, and ' . self::DEFAULT_FILES . ' matches none; pass the supervisord files of your queue workers (php artisan drover:import-supervisor /path/to/worker.conf …)');
                return 1;
            }
        }
        $target = $this->laravel->configPath('drover.php');
        $dryRun = (bool) $this->option('dry-run');
        if (!$dryRun && !$this->option('force') && file_exists($target)) {
            $this->error("drover:import-supervisor: $target already exists; pass --force to overwrite it, or --dry-run to print the import instead");
            return 1;
        }

        $config = $this->laravel['config'];
        $import = new SupervisorImporter($files, (array) ($config['queue.connections'] ?? []), $config['queue.default'] ?? null, [
            'connections' => array_merge(...array_map(fn ($c) => explode(',', (string) $c), (array) $this->option('connection') ?: [''])),
            'directory' => $this->option('directory'),
            'base_path' => $this->laravel->basePath(),
        ]);
        if ($import->problems() !== []) {
            foreach ($import->problems() as $problem) {
                $this->error($problem);
            }
            $this->error('drover:import-supervisor: nothing written. Fix these in the supervisord files (or pass other files) and run it again.');
            return 1;
        }
        $php = $import->render(date('Y-m-d'));

        // The file itself, evaluated as Laravel will load it (env(), storage_path()), must pass
        // drover's checks before it replaces anything.
        $dir = $dryRun ? sys_get_temp_dir() : dirname($target);
        if (!is_dir($dir) && !@mkdir($dir, 0755, true)) {
            $this->error("drover:import-supervisor: cannot create $dir");
            return 1;
        }
        // A private file of a random name, created exclusively: a path another user planted
        // (a symlink, their own PHP) is neither followed nor loaded (ImportFile).
        try {
            $tmp = ImportFile::create($dir, $php);
        } catch (\RuntimeException $e) {
            $this->error('drover:import-supervisor: ' . $e->getMessage());
            return 1;
        }
        try {
            $problem = $this->check($tmp);
            if ($problem !== null) {
                $this->error("drover:import-supervisor: the imported configuration does not pass drover's checks, nothing written (please report this with your supervisord files): $problem");
                return 1;
            }
            if ($dryRun) {
                $this->getOutput()->write($php);
                return 0;
            }
            if (!ImportFile::moveTo($tmp, $target)) {
                $this->error("drover:import-supervisor: cannot write $target");
                return 1;
            }
        } finally {
            @unlink($tmp);
        }

        $this->info("drover:import-supervisor: wrote $target from " . implode(', ', $import->files()));
        $this->line('pools: ' . implode(', ', array_map(
            fn ($name, $pool) => "$name (" . $pool['processes'] . ' × ' . implode(',', $pool['queue']) . ')',
            array_keys($import->defaults()),
            $import->defaults(),
        )) . ', in every environment');
        foreach ($import->notCarriedOver() as $line) {
            $this->warn("not carried over: $line");
        }
        foreach ($import->skipped() as $line) {
            $this->warn("skipped: $line");
        }
        foreach ($import->remarks() as $line) {
            $this->line("note: $line");
        }
        $this->nextSteps();
        return 0;
    }

    /** The written file loaded, then resolved for this environment and its catch-all entry; the first problem, or null. */
    private function check(string $file): ?string
    {
        try {
            $config = (static fn (string $f) => require $f)($file);
            Pools::entry($config, '*');
            Pools::resolve($config, $this->laravel->environment());
        } catch (InvalidConfig $e) {
            return implode('; ', $e->problems);
        } catch (\Throwable $e) {
            return get_class($e) . ': ' . $e->getMessage();
        }
        return null;
    }

    /** What the application still has to change, from its own queue configuration. */
    private function nextSteps(): void
    {
        $config = $this->laravel['config'];
        $drover = array_filter((array) ($config['queue.connections'] ?? []), fn ($c) => is_array($c) && ($c['driver'] ?? null) === 'drover');
        if ($drover === []) {
            $this->warn("next: config/queue.php has no drover connection; add 'drover' => ['driver' => 'drover', 'connection' => 'pgsql', 'queue' => 'default'] (connection: your PostgreSQL connection)");
        }
        $default = $config['queue.default'] ?? null;
        if (!isset($drover[$default])) {
            $this->warn('next: set QUEUE_CONNECTION=drover (now: ' . ($default ?? 'none') . '), so jobs are pushed to drover');
        }
        $this->line('next: start `php artisan drover` (systemd: docs/deploy.md), then stop and remove the supervisord programs once their queues are drained (docs/migrating-from-supervisord.md walks through the switch)');
    }
}
