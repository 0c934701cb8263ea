<?php

namespace Drover\Console;

use Drover\Binary;
use Drover\Config\AppPath;
use Drover\Config\Embedded;
use Drover\Config\Exporter;
use Illuminate\Contracts\Foundation\Application;

/**
 * What starting a drover master from artisan takes, for `php artisan drover` and for `queue:work`
 * / `queue:listen` on a drover connection: the contract exported from a drover configuration, the
 * master's environment (the database it uses, no password on disk), the contract written to the
 * state directory, and the process replaced by the binary.
 */
final class MasterLaunch
{
    /** @param array<string, mixed> $contract */
    private function __construct(
        public readonly array $contract,
        /** @var array<string, string> the master's environment */
        public readonly array $env,
        /** The drover binary, or null when none was found (see binary()). */
        private readonly ?string $binary,
    ) {
    }

    /**
     * Exports $drover (config('drover'), or a variant of it) for this application.
     *
     * @param array<string, mixed> $drover
     * @throws \InvalidArgumentException naming what is wrong (a pool option, the database
     *         connection), for the command to print
     */
    public static function prepare(Application $app, array $drover): self
    {
        $basePath = $app->basePath();
        $appPath = AppPath::detect($basePath, $drover['app_path'] ?? null, $_SERVER['SCRIPT_FILENAME'] ?? null, getenv('PWD') ?: null);
        $droverConnections = [];
        foreach ((array) $app['config']['queue.connections'] as $name => $connection) {
            if (($connection['driver'] ?? null) === 'drover') {
                $droverConnections[] = (string) $name;
            }
        }
        $binary = Binary::find($drover['binary'] ?? null);
        $hasSchedule = self::hasSchedule($app) && self::binaryRunsSchedules($binary);
        $contract = Exporter::contract($drover, $app->environment(), PHP_BINARY, $app->basePath('artisan'), $basePath, $appPath, $droverConnections ?: ['drover'], $hasSchedule);
        $env = getenv();
        $embedded = Embedded::wanted($app, $drover['database'] ?? null);
        // The application must dispatch where the master serves: a drover queue connection whose
        // database decides the other way (PostgreSQL against the embedded cluster) is refused.
        foreach ((array) $app['config']['queue.connections'] as $name => $connection) {
            if (($connection['driver'] ?? null) !== 'drover') {
                continue;
            }
            $database = is_string($connection['connection'] ?? null) && $connection['connection'] !== '' ? $connection['connection'] : ($drover['database'] ?? null);
            if (Embedded::wanted($app, $database) !== $embedded) {
                $master = $drover['database'] ?? $app['config']['database.default'];
                throw new \InvalidArgumentException($embedded
                    ? "drover: queue connection $name dispatches to database connection $database (PostgreSQL), but drover's own database connection, $master, is not PostgreSQL, so the master would run the embedded one and never see those jobs: set drover.database (DROVER_DB_CONNECTION) to $database"
                    : "drover: queue connection $name dispatches to database connection " . ($database ?? $app['config']['database.default']) . ", which is not PostgreSQL (so it would use the embedded cluster), but the master serves $master: set that queue connection's 'connection' to $master");
            }
        }
        if (!$embedded) {
            $name = $drover['database'] ?? $app['config']['database.default'];
            foreach (array_filter([$name, $drover['master_database'] ?? null]) as $named) {
                if (!is_array($app['config']["database.connections.$named"] ?? null)) {
                    throw new \InvalidArgumentException("drover: config/drover.php names database connection $named, which config/database.php does not define");
                }
            }
            // The connection's resolved config (its `url` parsed, read/write split applied), so
            // the master uses exactly the database the application writes to — as its own role
            // when master_database names one (docs/postgres-roles.md).
            $connection = $app['db']->connection($name)->getConfig();
            $master = $drover['master_database'] ?? null;
            if (is_string($master) && $master !== '' && $master !== $name) {
                $own = $app['db']->connection($master)->getConfig();
                // The same database by name; its host may differ (the application through
                // PgBouncer, the master direct: docs/postgres-topologies.md).
                if (($own['database'] ?? null) !== ($connection['database'] ?? null)) {
                    throw new \InvalidArgumentException(sprintf(
                        "drover: drover.master_database names database connection %s, whose database is %s, not %s, where connection %s (drover.database) enqueues: give it the same database, with the master's own username and password",
                        $master,
                        var_export($own['database'] ?? null, true),
                        var_export($connection['database'] ?? null, true),
                        $name,
                    ));
                }
                [$name, $connection] = [$master, $own];
            }
            $env['DROVER_DATABASE_URL'] = Exporter::databaseUrl($name, $connection);
        } else {
            unset($env['DROVER_DATABASE_URL']);
        }
        // The master's workers must not see a DATABASE_URL meant for the master.
        unset($env['DATABASE_URL']);
        return new self($contract, $env, $binary);
    }

    /**
     * The drover binary.
     *
     * @throws \RuntimeException when there is none, saying where it is looked for
     */
    public function binary(): string
    {
        return $this->binary ?? throw new \RuntimeException('drover: the drover binary was not found; set DROVER_BINARY or drover.binary in config/drover.php, or put drover on PATH');
    }

    /**
     * The same launch with a changed contract (e.g. a pool's environment added).
     *
     * @param array<string, mixed> $contract
     */
    public function withContract(array $contract): self
    {
        return new self($contract, $this->env, $this->binary);
    }

    /** The contract as the master reads it. */
    public function json(): string
    {
        return json_encode($this->contract, JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES);
    }

    /**
     * Writes the contract into its state directory (0600: it may name the database user), never
     * through anything planted there (ContractFile); returns the file.
     *
     * @throws \RuntimeException naming the directory or file and the fix
     */
    public function write(string $name = 'config.json'): string
    {
        return ContractFile::write((string) $this->contract['state_dir'], $name, $this->json());
    }

    /**
     * Replaces this process with `drover $args`: the master keeps the PID, the terminal and
     * the signals (Ctrl-C reaches it, not the workers, which have process groups of their own).
     * Returns only if the exec failed, with the reason.
     *
     * @throws \RuntimeException when there is no binary
     *
     * @param list<string> $args
     */
    public function exec(array $args): string
    {
        $binary = $this->binary();
        // What artisan wrote so far must not be lost with the PHP process.
        if (function_exists('ob_get_level')) {
            while (ob_get_level() > 0) {
                ob_end_flush();
            }
        }
        fflush(STDOUT);
        fflush(STDERR);
        pcntl_exec($binary, $args, $this->env);
        return "drover: could not start $binary: " . pcntl_strerror(pcntl_get_last_error());
    }

    /** The schema a binary must need to run the schedule (migration 12 came with it). */
    private const SCHEDULE_SCHEMA = 12;

    /**
     * Whether `$binary` runs the schedule: a binary of the previous release (schema 11 and
     * before) refuses a configuration with one, so during a rolling upgrade in which the package
     * came first that host's master starts without it, and says so (keep cron there until the
     * binary is upgraded). Unknown (no binary, one that does not answer): assumed to.
     */
    public static function binaryRunsSchedules(?string $binary): bool
    {
        if ($binary === null) {
            return true;
        }
        try {
            $schema = Binary::describe($binary)['schema'];
        } catch (\RuntimeException) {
            return true;
        }
        if ($schema >= self::SCHEDULE_SCHEMA) {
            return true;
        }
        fwrite(STDERR, "drover: the drover binary $binary is of an older release (schema $schema): it does not run the schedule, so this master starts without it; keep the schedule:run cron line on this host until the binary is upgraded (docs/upgrading.md)\n");
        return false;
    }

    /**
     * Whether the application defines a schedule: events in the console's Schedule (built by now
     * in an artisan command: Laravel 11+'s withSchedule runs as the console application starts,
     * Laravel 8's Kernel::schedule() once the application has booted).
     */
    private static function hasSchedule(Application $app): bool
    {
        if (!class_exists(\Illuminate\Console\Scheduling\Schedule::class)) {
            return false;
        }
        try {
            return $app->make(\Illuminate\Console\Scheduling\Schedule::class)->events() !== [];
        } catch (\Throwable $e) {
            fwrite(STDERR, 'drover: the schedule could not be read (' . get_class($e) . ': ' . $e->getMessage() . "): this master runs no schedule until it is fixed and reloaded\n");
            return false;
        }
    }
}
