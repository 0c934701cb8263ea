<?php

namespace Drover\Console;

use Drover\Binary;
use Drover\Config\AppPath;
use Drover\Config\Exporter;
use Drover\Config\Pools;
use Illuminate\Console\Command;

/**
 * `php artisan drover`: exports config/drover.php as drover's versioned JSON contract and replaces
 * this process with the drover master (`drover run --config FILE`), so systemd or a terminal
 * supervises the master directly.
 */
class DroverCommand extends Command
{
    protected $signature = 'drover
        {--dry-run : Print the exported configuration and the command instead of starting the master}
        {--export : Print only the exported configuration (what the master runs on a reload)}';

    protected $description = 'Start the drover master: it runs the worker pools of config/drover.php';

    public function handle(): int
    {
        $config = $this->laravel['config']['drover'] ?? [];
        try {
            $basePath = $this->laravel->basePath();
            $appPath = AppPath::detect($basePath, $config['app_path'] ?? null, $_SERVER['SCRIPT_FILENAME'] ?? null, getenv('PWD') ?: null);
            $droverConnections = [];
            foreach ((array) $this->laravel['config']['queue.connections'] as $name => $connection) {
                if (($connection['driver'] ?? null) === 'drover') {
                    $droverConnections[] = (string) $name;
                }
            }
            $contract = Exporter::contract($config, $this->laravel->environment(), PHP_BINARY, $this->laravel->basePath('artisan'), $basePath, $appPath, $droverConnections ?: ['drover']);
            $env = getenv();
            if (!($config['embedded'] ?? false)) {
                $name = $config['database'] ?? $this->laravel['config']['database.default'];
                if (!is_array($this->laravel['config']["database.connections.$name"] ?? null)) {
                    $this->error("drover: config/drover.php names database connection $name, which config/database.php does not define");
                    return 2;
                }
                // The connection's resolved config (its `url` parsed, read/write split applied), so
                // the master uses exactly the database the application writes to.
                $connection = $this->laravel['db']->connection($name)->getConfig();
                $env['DROVER_DATABASE_URL'] = Exporter::databaseUrl($name, $connection);
            } else {
                unset($env['DROVER_DATABASE_URL']);
            }
            // The master's workers must not see a DATABASE_URL meant for the master.
            unset($env['DATABASE_URL']);
        } catch (\InvalidArgumentException $e) {
            $this->error($e->getMessage());
            return 2;
        }
        if ($contract['pools'] === []) {
            // As Horizon: an environment without pools runs none, and the master still starts (a
            // reload picks pools up once they exist). Said on stderr: a reload parses stdout.
            fwrite(STDERR, $this->noPools($config) . "\n");
        }

        if ($this->option('export')) {
            $this->getOutput()->write(json_encode($contract, JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES));
            return 0;
        }
        $stateDir = $contract['state_dir'];
        if (!is_dir($stateDir) && !@mkdir($stateDir, 0755, true)) {
            $this->error("drover: cannot create the state directory $stateDir");
            return 2;
        }
        $file = rtrim($stateDir, '/') . '/config.json';
        $json = json_encode($contract, JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES);
        if (@file_put_contents($file, $json) === false || !chmod($file, 0600)) {
            $this->error("drover: cannot write $file");
            return 2;
        }
        $binary = Binary::find($config['binary'] ?? null);
        if ($binary === null) {
            $this->error('drover: the drover binary was not found; set DROVER_BINARY or drover.binary in config/drover.php, or put drover on PATH');
            return 2;
        }
        if ($this->option('dry-run')) {
            $this->line($json);
            $this->line("$binary run --config $file");
            return 0;
        }
        pcntl_exec($binary, ['run', '--config', $file], $env);
        $this->error("drover: could not start $binary: " . pcntl_strerror(pcntl_get_last_error()));
        return 1;
    }

    /** Why this environment has no pools, naming the entries. */
    private function noPools(array $config): string
    {
        $environment = $this->laravel->environment();
        $entry = Pools::matchedEnvironment($config, $environment);
        if ($entry === null) {
            $entries = array_keys($config['environments'] ?? []);
            return sprintf(
                "drover: no entry of drover.environments matches environment '%s' (entries: %s): this master runs no workers",
                $environment,
                $entries === [] ? 'none' : implode(', ', $entries),
            );
        }
        return "drover: environment '$environment' uses drover.environments.$entry, which with drover.defaults defines no pools: this master runs no workers";
    }
}
