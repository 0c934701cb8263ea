<?php

namespace Drover\Config;

/**
 * Turns config/drover.php (and the database connection it names) into what the drover master
 * reads: the versioned JSON contract (`drover run --config`), plus DATABASE_URL for its
 * environment so no password is written to disk.
 */
final class Exporter
{
    public const VERSION = 1;

    /**
     * The master's settings this release added, with the master's default: written only when
     * config/drover.php sets another value. A binary of the previous release refuses a key it does
     * not know, and the shipped config/drover.php shows every setting at its default, so writing
     * these always would refuse every 0.2 binary this package's contract (found by the rolling
     * upgrade from 0.2.0: a 0.2.0 master restarted under the new package exited on
     * `snapshot_alert_secs`). A binary that knows them uses the same default when they are absent.
     */
    public const ADDED_SINCE_PREVIOUS_RELEASE = ['snapshot_alert_secs' => 60];

    /**
     * @param array<string, mixed> $drover config('drover')
     * @param string $basePath Laravel's base_path() (the resolved release)
     * @param string|null $appPath the application's path as the service names it (AppPath::detect);
     *        every path inside the application is handed to the master through it
     * @return array<string, mixed>
     */
    /**
     * @param list<string> $droverConnections the queue connections that use the drover driver
     *        (config('queue.connections')), for `waits`
     */
    public static function contract(array $drover, string $environment, string $php, string $artisan, string $basePath, ?string $appPath = null, array $droverConnections = ['drover'], bool $hasSchedule = false): array
    {
        $appPath ??= $basePath;
        $artisan = AppPath::rebase($artisan, $basePath, $appPath);
        $pools = [];
        foreach (Pools::resolve($drover, $environment) as $name => $pool) {
            $pools[] = [
                'name' => $name,
                'queues' => $pool['queue'],
                'processes' => $pool['processes'],
                'prefetch' => $pool['prefetch'],
                'timeout' => (int) $pool['timeout'],
                'command' => [$php, $artisan, 'drover:work', "--pool=$name"],
                'spawn' => $pool['spawn'],
                // The zygote runs the same command with DROVER_ZYGOTE=1, and OPcache on for it
                // alone: its workers share the compiled code it keeps in shared memory.
                'zygote_command' => [$php, '-d', 'opcache.enable_cli=1', $artisan, 'drover:work', "--pool=$name"],
                'cwd' => $appPath,
                'memory' => (int) $pool['memory'],
                'nice' => (int) $pool['nice'],
                'boot_timeout' => (float) $pool['boot_timeout'],
                'balance' => $pool['balance'],
                'min_processes' => (int) $pool['min_processes'],
                'max_processes' => $pool['max_processes'] === null ? null : (int) $pool['max_processes'],
                'balance_max_shift' => (int) $pool['balance_max_shift'],
                'balance_cooldown' => (float) $pool['balance_cooldown'],
                'autoscaling_strategy' => $pool['autoscaling_strategy'],
                'scale_down_delay' => (float) $pool['scale_down_delay'],
            ];
            // Written only when set: a binary of the previous release, which has no such
            // option, still reads the contract of a package that does not use it
            // (docs/upgrading.md).
            if ((float) $pool['outage_grace'] > 0) {
                $pools[array_key_last($pools)]['outage_grace'] = (float) $pool['outage_grace'];
            }
        }
        $contract = [
            'version' => self::VERSION,
            'state_dir' => AppPath::rebase((string) $drover['state_dir'], $basePath, $appPath),
            // The reload command's working directory (and the default of pools), as given: the
            // kernel resolves a `current` symlink at each spawn, so a reload runs the new release.
            'cwd' => $appPath,
            'user' => ($drover['user'] ?? null) === null || $drover['user'] === '' ? null : (string) $drover['user'],
            // A reload (SIGHUP, drover restart) prints this contract anew from config/drover.php.
            'reload_command' => [$php, $artisan, 'drover', '--export'],
            'metrics_listen' => ($drover['metrics']['listen'] ?? null) === null || $drover['metrics']['listen'] === '' ? null : (string) $drover['metrics']['listen'],
            'long_waits' => [
                'thresholds' => self::waits($drover['waits'] ?? [], $droverConnections),
                'command' => [$php, $artisan, 'drover:long-wait'],
            ],
            'pools' => $pools,
        ];
        // The master's own settings, each only when config/drover.php sets it: the defaults are
        // the master's (src/config/mod.rs), written once. Cast, because env() gives strings.
        $settings = [
            'auto_migrate' => [$drover['auto_migrate'] ?? null, 'bool'],
            'lease' => [$drover['lease'] ?? null, 'float'],
            'shutdown_grace' => [$drover['shutdown_grace'] ?? null, 'float'],
            'poll_interval' => [$drover['poll_interval'] ?? null, 'float'],
            'postgres_user' => [$drover['postgres_user'] ?? null, 'string'],
            'restart_failures' => [$drover['restart_failures'] ?? null, 'int'],
            'restart_pause' => [$drover['restart_pause'] ?? null, 'float'],
            'failed_retention_days' => [$drover['failed_retention_days'] ?? null, 'int'],
            'record_metrics' => [$drover['metrics']['record'] ?? null, 'bool'],
            'metrics_trim' => [$drover['metrics']['trim'] ?? null, 'int'],
            'history_minutes' => [$drover['metrics']['history'] ?? null, 'int'],
            'snapshot_alert_secs' => [$drover['snapshot_alert'] ?? null, 'int'],
        ];
        foreach ($settings as $key => [$value, $type]) {
            if ($value === null) {
                continue;
            }
            $value = self::cast($value, $type);
            if (array_key_exists($key, self::ADDED_SINCE_PREVIOUS_RELEASE) && $value === self::ADDED_SINCE_PREVIOUS_RELEASE[$key]) {
                continue;
            }
            $contract[$key] = $value;
        }
        // Written only when set, as outage_grace: a binary of the previous release still reads
        // the contract of a package that does not use it.
        $budgets = self::budgets($drover['budgets'] ?? [], $droverConnections);
        if ($budgets !== []) {
            $contract['queue_budgets'] = $budgets;
        }
        // Traces, written only when an endpoint is set (as outage_grace: a binary of the
        // previous release still reads the contract of an application that exports none).
        $traces = is_array($drover['traces'] ?? null) ? $drover['traces'] : [];
        if (($traces['endpoint'] ?? null) !== null && $traces['endpoint'] !== '') {
            $contract['traces'] = [
                'endpoint' => (string) $traces['endpoint'],
                'service_name' => (string) ($traces['service_name'] ?? 'drover'),
            ];
        }
        $fair = self::fairQueues($drover['fair'] ?? [], $droverConnections);
        if ($fair !== []) {
            $contract['fair_queues'] = $fair;
        }
        // The schedule, when the application defines one and drover.schedule is on; written only
        // then, as outage_grace: a binary of the previous release still reads the contract of
        // an application without a schedule.
        if ($hasSchedule && self::cast($drover['schedule'] ?? true, 'bool')) {
            $contract['schedule'] = [
                'export_command' => [$php, $artisan, 'drover:schedule-export'],
                'run_command' => [$php, $artisan, 'drover:schedule-run'],
                'retention_days' => max(1, (int) ($drover['schedule_retention_days'] ?? 7)),
                'alerts' => [
                    'failures' => max(0, (int) self::cast($drover['schedule_alert_failures'] ?? 3, 'int')),
                    'overdue_periods' => max(0, (int) self::cast($drover['schedule_alert_overdue'] ?? 3, 'int')),
                    'cooldown_secs' => max(1, (int) self::cast($drover['long_wait_cooldown'] ?? 300, 'int')),
                    'command' => [$php, $artisan, 'drover:long-wait'],
                ],
            ];
            // Runs are forked from the first pool's zygote that forks: the application is booted
            // there already (a run starts within milliseconds, without a boot).
            foreach ($pools as $pool) {
                if ($pool['spawn'] === 'fork') {
                    $contract['schedule']['fork_from'] = $pool['name'];
                    break;
                }
            }
        }
        // The bearer token of /metrics, written only when set, as outage_grace: a binary of the
        // previous release still reads the contract of an application without one. A secret:
        // the contract file is private (0600), and the master never prints it.
        $token = $drover['metrics']['token'] ?? null;
        if ($token !== null && $token !== '') {
            $contract['metrics_token'] = (string) $token;
        }
        if (($drover['long_wait_cooldown'] ?? null) !== null) {
            $contract['long_waits']['cooldown'] = self::cast($drover['long_wait_cooldown'], 'float');
        }
        return $contract;
    }

    /** A setting as the contract's type (env() gives strings; `"false"` is false). */
    private static function cast(mixed $value, string $type): bool|int|float|string
    {
        return match ($type) {
            'bool' => is_string($value) ? filter_var($value, FILTER_VALIDATE_BOOLEAN) : (bool) $value,
            'int' => (int) $value,
            'float' => (float) $value,
            default => (string) $value,
        };
    }

    /**
     * `waits` (Horizon's form, `connection:queue => seconds`) as the master's per-queue
     * thresholds: only keys on a connection of the drover driver (`$droverConnections`; a key
     * without a connection names a queue of `drover`), so a `redis:default` left from Horizon does
     * not set drover's `default`. Two keys for one queue: the smallest threshold above 0 wins.
     *
     * @param mixed $waits
     * @param list<string> $droverConnections
     * @return array<string, int>|object an empty JSON object when there are none
     */
    public static function waits($waits, array $droverConnections = ['drover'])
    {
        $thresholds = [];
        foreach ((array) $waits as $key => $seconds) {
            $key = (string) $key;
            [$connection, $queue] = str_contains($key, ':') ? explode(':', $key, 2) : ['drover', $key];
            if (!in_array($connection, $droverConnections, true) || $queue === '') {
                continue;
            }
            $seconds = max(0, (int) $seconds);
            $known = $thresholds[$queue] ?? null;
            if ($known === null || ($seconds > 0 && ($known === 0 || $seconds < $known))) {
                $thresholds[$queue] = $seconds;
            }
        }
        return $thresholds === [] ? new \stdClass() : $thresholds;
    }

    /**
     * `budgets` (`connection:queue => jobs`, keyed as `waits` is) as the master's
     * `queue_budgets`: only keys on a connection of the drover driver (Pools checks each is a
     * whole number from 1 to Pools::MAX_BUDGET; the master checks again). Two keys for one
     * queue: the smaller budget wins.
     *
     * @param mixed $budgets
     * @param list<string> $droverConnections
     * @return array<string, int>
     */
    public static function budgets($budgets, array $droverConnections = ['drover']): array
    {
        $out = [];
        foreach ((array) $budgets as $key => $jobs) {
            $key = (string) $key;
            [$connection, $queue] = str_contains($key, ':') ? explode(':', $key, 2) : ['drover', $key];
            if (!in_array($connection, $droverConnections, true)) {
                continue;
            }
            $jobs = (int) $jobs;
            $out[$queue] = min($jobs, $out[$queue] ?? $jobs);
        }
        ksort($out);
        return $out;
    }

    /**
     * `fair` (`connection:queue`, or a bare queue name for the `drover` connection) as the
     * master's `fair_queues`: only entries on a connection of the drover driver, each once.
     *
     * @param mixed $fair
     * @param list<string> $droverConnections
     * @return list<string>
     */
    public static function fairQueues($fair, array $droverConnections = ['drover']): array
    {
        $out = [];
        foreach ((array) $fair as $entry) {
            [$connection, $queue] = str_contains((string) $entry, ':') ? explode(':', (string) $entry, 2) : ['drover', (string) $entry];
            if (in_array($connection, $droverConnections, true)) {
                $out[$queue] = true;
            }
        }
        ksort($out);
        return array_keys($out);
    }

    /**
     * A libpq key=value connection string for a Laravel pgsql connection.
     *
     * @param array<string, mixed> $connection
     */
    public static function databaseUrl(string $name, array $connection): string
    {
        if (($connection['driver'] ?? null) !== 'pgsql') {
            throw new InvalidConfig(["database connection $name uses driver " . ($connection['driver'] ?? 'none') . '; drover needs PostgreSQL (pgsql)']);
        }
        // A read/write split: the master writes, so it uses the write side.
        if (isset($connection['write']) && is_array($connection['write'])) {
            $connection = array_merge($connection, $connection['write']);
        }
        // Several hosts (Laravel's array, or libpq's `a,b`) are a failover list: the master tries
        // each in turn and keeps the one that takes writes (docs/postgres-topologies.md).
        $host = $connection['host'] ?? '127.0.0.1';
        if (is_array($host)) {
            $host = implode(',', $host);
        }
        // TLS as the application's own connection has it (Laravel's pgsql keys are libpq's): the
        // master speaks every sslmode, a CA file or `system`, and client certificates.
        $parts = [
            'host' => $host,
            'port' => $connection['port'] ?? 5432,
            'dbname' => $connection['database'] ?? 'forge',
            'user' => $connection['username'] ?? 'forge',
            'password' => $connection['password'] ?? '',
            'sslmode' => $connection['sslmode'] ?? null,
            'sslrootcert' => $connection['sslrootcert'] ?? null,
            'sslcert' => $connection['sslcert'] ?? null,
            'sslkey' => $connection['sslkey'] ?? null,
        ];
        $out = [];
        foreach ($parts as $key => $value) {
            if ($value === null || $value === '') {
                continue;
            }
            $out[] = $key . "='" . str_replace(['\\', "'"], ['\\\\', "\\'"], (string) $value) . "'";
        }
        return implode(' ', $out);
    }
}
