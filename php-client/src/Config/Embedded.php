<?php

namespace Drover\Config;

use Illuminate\Contracts\Foundation\Application;

/**
 * Which database drover's tables are on, for the application's side (dispatch, the failer's
 * group release, the dashboard, queue pauses) and for the master it starts.
 *
 * `drover.embedded` is true, false, or `auto` (the default): auto means the embedded PostgreSQL
 * when no PostgreSQL is configured — the connection drover would use is not pgsql, as in a new
 * Laravel 12 application on SQLite. The master asks of drover.database (else the default), the
 * queue driver of its queue connection's `connection`; Console\MasterLaunch refuses to start a
 * master when the two would decide differently, naming the setting to change. The master then runs a private cluster in its state directory and writes its DSN to
 * `<state_dir>/master.json`; the application reaches it through a connection registered here,
 * `drover_embedded`. An application that points a pgsql connection at the embedded cluster
 * itself (the documented manual set-up) keeps using that connection.
 */
final class Embedded
{
    /** The database connection registered for the embedded cluster. */
    public const CONNECTION = 'drover_embedded';

    /**
     * Whether drover runs (and uses) its embedded PostgreSQL, given the database connection it
     * would use otherwise (null: the default).
     *
     * @throws InvalidConfig when drover.embedded is not true, false or 'auto'
     */
    public static function wanted(Application $app, ?string $connection = null): bool
    {
        $embedded = $app['config']['drover.embedded'] ?? 'auto';
        if ($embedded === true || $embedded === 1 || $embedded === '1') {
            return true;
        }
        if ($embedded === false || $embedded === 0 || $embedded === '0' || $embedded === null || $embedded === '') {
            return false;
        }
        if ($embedded !== 'auto') {
            throw new InvalidConfig(["drover.embedded must be true, false or 'auto' (DROVER_EMBEDDED), got " . var_export($embedded, true)]);
        }
        return !self::isPostgres($app, $connection);
    }

    /**
     * The database connection holding drover's tables: $connection (or the default) when it is
     * PostgreSQL, else the embedded cluster's when drover runs one, else $connection as given
     * (whoever uses it names its driver).
     */
    public static function connectionName(Application $app, ?string $connection = null): ?string
    {
        $connection = $connection === '' ? null : $connection;
        if (self::isPostgres($app, $connection) || !self::wanted($app, $connection)) {
            return $connection;
        }
        self::register($app);
        return self::CONNECTION;
    }

    private static function isPostgres(Application $app, ?string $connection): bool
    {
        $connection ??= (string) $app['config']['database.default'];
        return ($app['config']["database.connections.$connection.driver"] ?? null) === 'pgsql';
    }

    /**
     * Registers `drover_embedded` from the running master's `master.json` (its DSN: a socket in
     * the state directory, or loopback TCP with a password when the socket path would be too long).
     *
     * @throws \RuntimeException when no master has started the cluster yet, saying how to
     */
    private static function register(Application $app): void
    {
        $config = $app['config'];
        $stateDir = rtrim((string) ($config['drover.state_dir'] ?? $app->storagePath() . '/drover'), '/');
        $file = "$stateDir/master.json";
        $state = is_readable($file) ? json_decode((string) file_get_contents($file), true) : null;
        $dsn = is_array($state) ? ($state['pdo_dsn'] ?? null) : null;
        if (!is_string($dsn) || !str_starts_with($dsn, 'pgsql:')) {
            throw new \RuntimeException("drover: the embedded PostgreSQL is not running (no $file): it runs with the drover master — start `php artisan queue:listen` (or `php artisan drover`) first, or configure a PostgreSQL connection (DB_CONNECTION=pgsql) for drover");
        }
        $parts = [];
        foreach (explode(';', substr($dsn, strlen('pgsql:'))) as $pair) {
            [$key, $value] = array_pad(explode('=', $pair, 2), 2, '');
            $parts[$key] = $value;
        }
        $config->set('database.connections.' . self::CONNECTION, [
            'driver' => 'pgsql',
            'host' => $parts['host'] ?? "$stateDir/postgres",
            'port' => (int) ($parts['port'] ?? 5432),
            'database' => $parts['dbname'] ?? 'drover',
            'username' => $parts['user'] ?? 'drover',
            'password' => $parts['password'] ?? '',
            'charset' => 'utf8',
            'prefix' => '',
            'search_path' => 'public', // Laravel 9+
            'schema' => 'public', // Laravel 8
            'sslmode' => 'disable',
        ]);
    }
}
