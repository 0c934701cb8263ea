<?php

namespace Drover\Console;

use Drover\Binary;
use Drover\Config\AppPath;
use Drover\Config\Exporter;
use Drover\Schema\SchemaMigrator;
use Drover\Version;
use Illuminate\Console\Command;

/**
 * `php artisan drover:install`: what a Laravel team runs after `composer require drover/laravel`.
 * Publishes config/drover.php and drover's migration (so `php artisan migrate` creates the schema
 * at the version this release expects), checks that the drover binary is there and speaks this
 * package's contract and schema, and says what is left to do. Exit 1 when the binary is missing or
 * does not match, so a provisioning script stops there.
 */
class InstallCommand extends Command
{
    protected $signature = 'drover:install {--force : Overwrite config/drover.php and the migration if they exist}';

    protected $description = 'Publish drover\'s configuration and migration, check the drover binary and print the next steps';

    /** The published migration's name, without its date. */
    private const MIGRATION = 'create_drover_schema.php';

    public function handle(): int
    {
        $this->publish('drover-config', $this->laravel->configPath('drover.php'), 'config/drover.php');
        $existing = glob($this->laravel->databasePath('migrations') . '/*_' . self::MIGRATION) ?: [];
        if ($existing !== [] && !$this->option('force')) {
            $this->line('  database/migrations/' . basename($existing[0]) . ': already there (--force to replace it)');
        } else {
            $this->publish('drover-migrations', null, 'the migration database/migrations/*_' . self::MIGRATION);
        }

        $ok = $this->checkBinary();
        $this->nextSteps();
        return $ok ? 0 : 1;
    }

    private function publish(string $tag, ?string $target, string $what): void
    {
        if ($target !== null && is_file($target) && !$this->option('force')) {
            $this->line("  $what: already there (--force to replace it)");
            return;
        }
        $this->callSilently('vendor:publish', ['--tag' => $tag, '--force' => (bool) $this->option('force')]);
        $this->info("  $what: published");
    }

    /** The binary exists and matches this package's version, contract and schema. */
    private function checkBinary(): bool
    {
        $binary = Binary::find(config('drover.binary'));
        if ($binary === null) {
            $this->error('  the drover binary was not found (drover.binary, DROVER_BINARY, then PATH).');
            $this->line('  Install it: the drover .deb (/usr/bin/drover), or `cargo install --path .` in a clone of drover, or set DROVER_BINARY to its path.');
            return false;
        }
        try {
            $found = Binary::describe($binary);
        } catch (\RuntimeException $e) {
            $this->error('  ' . $e->getMessage());
            return false;
        }
        $apart = Version::releasesApart($found['version'], Version::PACKAGE);
        $problems = [];
        if ($apart === null || $apart > 1) {
            $problems[] = "version {$found['version']} (drover/laravel is " . Version::PACKAGE . '; one release apart is the most that works together)';
        }
        if ((int) $found['contract'] !== Exporter::VERSION) {
            $problems[] = "contract {$found['contract']} (drover/laravel writes " . Exporter::VERSION . ')';
        }
        if ($problems !== []) {
            $this->error("  $binary does not work with drover/laravel " . Version::PACKAGE . ': ' . implode(', ', $problems) . '. Install the drover binary of the same version as the package (docs/upgrading.md).');
            return false;
        }
        if ($apart === 1) {
            $this->warn("  drover binary: $binary, version {$found['version']} (schema {$found['schema']}), one release apart from drover/laravel " . Version::PACKAGE . ' (schema ' . SchemaMigrator::latest() . '): they work together during a rolling upgrade; finish it by upgrading the other (docs/upgrading.md)');
            return true;
        }
        $this->info("  drover binary: $binary, version {$found['version']} (contract {$found['contract']}, schema {$found['schema']}): matches");
        return true;
    }

    private function nextSteps(): void
    {
        $config = $this->laravel['config'];
        $connection = $config->get('drover.database') ?: $config->get('database.default');
        $steps = ["php artisan migrate          # creates schema drover on database connection $connection"];
        if ($config->get('queue.connections.drover.driver') !== 'drover') {
            $steps[] = "config/queue.php, under 'connections':\n"
                . "       'drover' => ['driver' => 'drover', 'connection' => '$connection', 'queue' => 'default', 'after_commit' => false],";
        }
        if ($config->get('queue.default') !== 'drover') {
            $steps[] = 'QUEUE_CONNECTION=drover       # in .env';
        }
        $app = AppPath::detect($this->laravel->basePath(), $config->get('drover.app_path'), $_SERVER['SCRIPT_FILENAME'] ?? null, getenv('PWD') ?: null);
        $steps[] = 'php artisan drover            # run the workers here (development), or as a service:';
        $steps[] = "systemd: the drover .deb's drover@.service — /etc/drover/APP.env with DROVER_APP=$app and DROVER_USER=<the app's user>,\n"
            . '       then `systemctl enable --now drover@APP` (docs/deploy.md)';
        $this->line('');
        $this->line('Next:');
        foreach ($steps as $i => $step) {
            $this->line(sprintf('  %d. %s', $i + 1, $step));
        }
    }
}
