<?php

namespace Drover\Console;

use Drover\Binary;
use Drover\Config\AppPath;
use Drover\Config\Exporter;
use Drover\Schema\SchemaMigrator;
use Drover\Schema\SchemaWindow;
use Drover\Version;
use Illuminate\Console\Command;

/**
 * `php artisan drover:install`: what a Laravel team runs after `composer require drover/laravel`.
 * Publishes config/drover.php and drover's migration (so `php artisan migrate` creates the schema
 * at the version this release expects), checks that the drover binary is there and speaks this
 * package's contract and schema — and, when the database is reachable, that the binary runs on the
 * schema the database has — and says what is left to do. Exit 1 when the binary is missing, does
 * not match or would be refused on the database, so a provisioning script stops there.
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
        $this->checkStateDirectory();
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

    /**
     * The binary exists and matches this package's version, contract and schema, and runs on the
     * database's schema when the database can be read.
     */
    public function checkBinary(): bool
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
        } else {
            $this->info("  drover binary: $binary, version {$found['version']} (contract {$found['contract']}, schema {$found['schema']}): matches");
        }
        return $this->checkSchema((int) $found['schema']);
    }

    /**
     * The binary's schema against this package's migrations, and against the database's applied
     * schema and the oldest drover its newer migrations allow, when the database can be read:
     * whether this binary can run on that database, and the fix when not.
     */
    public function checkSchema(int $schema): bool
    {
        $package = SchemaMigrator::latest();
        $said = SchemaMigrator::saidReaders();
        $ok = true;
        if ($schema === $package) {
            $this->line("  schema: the binary's $schema is this package's");
        } elseif ($schema < $package) {
            // What `php artisan migrate` with this package brings the database to, as its files say.
            $blocking = SchemaMigrator::blockingNewer($said, $schema);
            if ($blocking === []) {
                $this->line("  schema: the binary needs $schema, this package migrates to $package, and each migration above $schema lets the binary run on it");
            } else {
                $this->error(sprintf(
                    '  schema: the binary needs %d, this package migrates to %d, and migration(s) %s need a newer binary: once `php artisan migrate` runs, a master of this binary is refused at start. Install the drover binary of version %s (docs/upgrading.md)',
                    $schema,
                    $package,
                    implode(', ', array_map(fn (int $v) => sprintf('%04d', $v), $blocking)),
                    Version::PACKAGE,
                ));
                $ok = false;
            }
        } else {
            $this->line("  schema: the binary needs $schema, newer than this package's $package: a starting master migrates the database to it, and this package runs on it where each newer migration allows (its `php artisan migrate` names any that does not)");
        }
        $name = $this->laravel['config']->get('drover.database') ?: null;
        try {
            $done = (new SchemaMigrator($this->laravel['db']->connection($name)))->appliedReaders();
        } catch (\Throwable $e) {
            $this->line('  database: not read (' . strtok($e->getMessage(), "\n") . '); a master checks the schema when it starts');
            return $ok;
        }
        [$runs, $line] = SchemaWindow::binaryLine($schema, $done, $said);
        if ($runs) {
            $this->line("  database: $line");
        } else {
            $this->error("  database: $line");
        }
        return $ok && $runs;
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
        $user = self::applicationUser($this->laravel->storagePath());
        $steps[] = 'php artisan drover            # run the workers here (development), or as a service:';
        $steps[] = "systemd, with the drover .deb: /etc/drover/APP.env with DROVER_APP=$app and DROVER_USER=$user,\n"
            . "       then `systemctl enable --now drover@APP`: it starts php artisan drover as $user, never as root (docs/deploy.md)";
        $steps[] = "systemd, without it: dist/drover.service as /etc/systemd/system/drover.service, with ExecStart=/usr/bin/php $app/artisan drover\n"
            . "       and User=$user: the master, its workers and every command it runs are $user's (docs/security.md)";
        $this->line('');
        $this->line('Next:');
        foreach ($steps as $i => $step) {
            $this->line(sprintf('  %d. %s', $i + 1, $step));
        }
    }

    /**
     * The user drover runs as: the owner of the application's storage/ (what PHP-FPM writes as),
     * by name; `www-data` when storage/ is root's (a checkout not yet given to its user).
     */
    public static function applicationUser(string $storage): string
    {
        $owner = @fileowner($storage);
        if ($owner === false || $owner === 0 || !function_exists('posix_getpwuid')) {
            return 'www-data';
        }
        return posix_getpwuid($owner)['name'] ?? (string) $owner;
    }

    /**
     * The state directory, if it exists, must be the application's user's (the master runs as
     * it): one a root master of drover 0.2 made is moved aside at the next start, when no master
     * holds it; anything else is named here with the fix.
     */
    private function checkStateDirectory(): void
    {
        $dir = (string) $this->laravel['config']->get('drover.state_dir');
        if ($dir === '' || (!is_dir($dir) && !is_link($dir))) {
            return;
        }
        $storageOwner = @fileowner($this->laravel->storagePath());
        $owner = @fileowner($dir);
        if (is_link($dir)) {
            $this->warn("  the state directory $dir is a symbolic link: the master refuses it (docs/security.md); remove it, drover makes the directory");
        } elseif ($owner === 0 && $storageOwner !== 0) {
            $this->warn("  the state directory $dir belongs to root (a root master of an earlier drover made it): the package's drover@.service (`drover launch`) moves it aside at its next start, if no master holds it; else remove it as root (`rm -r $dir`)");
        } elseif ($storageOwner !== false && $owner !== $storageOwner) {
            $this->warn("  the state directory $dir belongs to uid $owner, not to the owner of storage/ (uid $storageOwner), who runs the master: `chown -R $storageOwner: $dir`");
        }
    }
}
