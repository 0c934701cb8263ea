<?php

namespace Drover\Config;

use Drover\DroverQueue;

/**
 * Reads config/drover.php: the pools an environment runs, every key checked. Unknown keys are
 * refused with their names, all at once.
 *
 * Environments follow Laravel Horizon's rules, so a Horizon user's habits (and an imported
 * config/horizon.php) mean the same here: the first entry of drover.environments whose key matches
 * the environment (`*` wildcards, as Str::is) supplies the pools, drover.defaults is applied to
 * each of them, and an environment no entry matches runs no workers at all.
 */
final class Pools
{
    /** The largest budget of a queue (the master's MAX_BUDGET). */
    public const MAX_BUDGET = 1000000;

    public const TOP_KEYS = ['binary', 'database', 'master_database', 'embedded', 'state_dir', 'app_path', 'auto_migrate', 'lease', 'shutdown_grace', 'poll_interval', 'postgres_user', 'user', 'restart_failures', 'restart_pause', 'failed_retention_days', 'groups', 'dedup_window', 'schedule', 'schedule_retention_days', 'schedule_alert_failures', 'schedule_alert_overdue', 'waits', 'long_wait_cooldown', 'snapshot_alert', 'budgets', 'fair', 'dashboard', 'metrics', 'traces', 'defaults', 'environments'];

    /**
     * Every pool option with its default. The options the master reads itself come from the
     * binary (MasterPoolOptions, generated from its own defaults); the rest are the package's:
     * Laravel's queue:work defaults (memory 128, tries 1, sleep 3, ...), one process, and
     * workers forked from a booted zygote.
     */
    public const POOL_DEFAULTS = [
        'connection' => 'drover',
        'queue' => ['default'],
        'processes' => 1,
        'tries' => 1,
        'timeout' => MasterPoolOptions::DEFAULTS['timeout'],
        'outage_grace' => MasterPoolOptions::DEFAULTS['outage_grace'],
        'memory' => 128,
        'backoff' => 0,
        'max_jobs' => 0,
        'max_time' => 0,
        'prefetch' => MasterPoolOptions::DEFAULTS['prefetch'],
        'nice' => MasterPoolOptions::DEFAULTS['nice'],
        'boot_timeout' => MasterPoolOptions::DEFAULTS['boot_timeout'],
        'spawn' => 'fork',
        'balance' => MasterPoolOptions::DEFAULTS['balance'],
        'min_processes' => MasterPoolOptions::DEFAULTS['min_processes'],
        'max_processes' => MasterPoolOptions::DEFAULTS['max_processes'],
        'balance_max_shift' => MasterPoolOptions::DEFAULTS['balance_max_shift'],
        'balance_cooldown' => MasterPoolOptions::DEFAULTS['balance_cooldown'],
        'autoscaling_strategy' => MasterPoolOptions::DEFAULTS['autoscaling_strategy'],
        'scale_down_delay' => MasterPoolOptions::DEFAULTS['scale_down_delay'],
        'sleep' => 3,
        'force' => false,
        'rest' => 0,
    ];


    /**
     * The pools $environment runs: those of the first entry of drover.environments whose key
     * matches it, with drover.defaults applied. An environment no entry matches gets none (an
     * empty array, not an error), as Horizon deploys nothing there; matchedEnvironment() tells a
     * caller which entry, if any, was used, so it can say why nothing runs.
     *
     * @param array<string, mixed> $config config('drover')
     * @return array<string, array<string, mixed>> pool name => complete options
     */
    public static function resolve(array $config, string $environment): array
    {
        $problems = self::shapeProblems($config);
        $entry = self::matchedEnvironment($config, $environment);
        if ($entry === null) {
            if ($problems !== []) {
                throw new InvalidConfig($problems);
            }
            return [];
        }
        return self::pools($config, $entry, $problems);
    }

    /**
     * The pools of one named entry of drover.environments, whichever environments it matches. The
     * Horizon importer checks every entry with it, including a pattern entry that resolve() would
     * only reach through some environment name.
     *
     * @param array<string, mixed> $config config('drover')
     * @return array<string, array<string, mixed>> pool name => complete options
     */
    public static function entry(array $config, string $entry): array
    {
        $problems = self::shapeProblems($config);
        $entries = $config['environments'] ?? [];
        if (!is_array($entries) || !array_key_exists($entry, $entries)) {
            $keys = is_array($entries) ? implode(', ', array_map('strval', array_keys($entries))) : '';
            throw new InvalidConfig(array_merge($problems, ["drover.environments has no entry $entry (entries: " . ($keys === '' ? 'none' : $keys) . ')']));
        }
        return self::pools($config, $entry, $problems);
    }

    /**
     * The key of the entry of drover.environments that $environment runs, or null when none
     * matches (then it runs no workers). Entries are tried in the order they are written and the
     * first match wins, as Horizon picks the first matching environment of its provisioning plan;
     * so put specific keys (`production-eu`) before patterns (`production*`, `*`).
     *
     * @param array<string, mixed> $config config('drover')
     */
    public static function matchedEnvironment(array $config, string $environment): ?string
    {
        $entries = $config['environments'] ?? [];
        if (!is_array($entries)) {
            return null;
        }
        foreach (array_keys($entries) as $key) {
            if (self::matches((string) $key, $environment)) {
                return (string) $key;
            }
        }
        return null;
    }

    /**
     * Whether an entry key matches an environment name, as Laravel's Str::is($key, $environment)
     * decides for Horizon: `*` stands for any run of characters (none included), everything else
     * matches itself, case-sensitively. Written out here so the config can be checked without
     * Laravel loaded (the importer's unit tests, plain PHP tools).
     */
    public static function matches(string $pattern, string $environment): bool
    {
        if ($pattern === '*' || $pattern === $environment) {
            return true;
        }
        $regex = '#^' . str_replace('\*', '.*', preg_quote($pattern, '#')) . '\z#su';
        return preg_match($regex, $environment) === 1;
    }

    /**
     * Problems that do not depend on the environment: unknown top-level keys (returned, to be
     * reported with the pools' problems), and defaults, environments, entries or pools that are
     * not arrays (thrown at once: nothing can be merged). Every entry is checked, not only the
     * matched one, so a typo in the production entry shows on a developer's machine too.
     *
     * @param array<string, mixed> $config
     * @return list<string>
     */
    /**
     * What is wrong with drover.dedup_window, or null: whole seconds from 1 to 86400. Asked at
     * export and by the queue connector, which reads the key at dispatch.
     */
    public static function dedupWindowProblem(mixed $window): ?string
    {
        if ((!is_int($window) && !(is_string($window) && ctype_digit($window))) || (int) $window < 1 || (int) $window > 86400) {
            return 'drover.dedup_window must be a whole number of seconds from 1 to 86400, got ' . var_export($window, true);
        }
        return null;
    }

    /**
     * What is wrong with drover.traces.propagate, or null: true or false (env()'s "true" and
     * "false" included). Asked at export and by the queue connector, which reads it at dispatch.
     */
    public static function tracePropagationProblem(mixed $propagate): ?string
    {
        if (!is_bool($propagate) && filter_var($propagate, FILTER_VALIDATE_BOOLEAN, FILTER_NULL_ON_FAILURE) === null) {
            return 'drover.traces.propagate must be true or false, got ' . var_export($propagate, true);
        }
        return null;
    }

    private static function shapeProblems(array $config): array
    {
        $problems = [];
        foreach (array_diff(array_keys($config), self::TOP_KEYS) as $key) {
            $problems[] = "unknown key drover.$key (known: " . implode(', ', self::TOP_KEYS) . ')';
        }
        $defaults = $config['defaults'] ?? [];
        $environments = $config['environments'] ?? [];
        $notArrays = [];
        $waits = $config['waits'] ?? [];
        if (!is_array($waits)) {
            $notArrays[] = 'drover.waits is ' . get_debug_type($waits);
        } else {
            foreach ($waits as $key => $seconds) {
                if (!is_int($seconds) && !(is_string($seconds) && ctype_digit($seconds))) {
                    $problems[] = "drover.waits.$key must be a whole number of seconds (0 turns the alert off), got " . var_export($seconds, true);
                }
            }
        }
        $budgets = $config['budgets'] ?? [];
        if (!is_array($budgets)) {
            $notArrays[] = 'drover.budgets is ' . get_debug_type($budgets);
        } else {
            foreach ($budgets as $key => $jobs) {
                $whole = is_int($jobs) || (is_string($jobs) && ctype_digit($jobs));
                if (!$whole || (int) $jobs < 1 || (int) $jobs > self::MAX_BUDGET) {
                    $problems[] = "drover.budgets.$key must be a whole number of jobs from 1 to " . self::MAX_BUDGET . ' (remove the key for no budget), got ' . var_export($jobs, true);
                }
            }
        }
        $fair = $config['fair'] ?? [];
        if (!is_array($fair) || !array_is_list($fair) || array_filter($fair, fn ($q) => !is_string($q) || $q === '' || str_ends_with($q, ':')) !== []) {
            $problems[] = 'drover.fair must be a list of queues (`connection:queue`, or a queue name of the drover connection), got ' . var_export($fair, true);
        }
        $groups = $config['groups'] ?? [];
        if (!is_array($groups)) {
            $notArrays[] = 'drover.groups is ' . get_debug_type($groups);
        } else {
            foreach (array_diff(array_keys($groups), ['hold']) as $key) {
                $problems[] = "unknown key drover.groups.$key (known: hold)";
            }
            $hold = $groups['hold'] ?? [];
            if (!is_array($hold) || array_filter($hold, fn ($q) => !is_string($q) || $q === '') !== []) {
                $problems[] = 'drover.groups.hold must be a list of queue names, got ' . var_export($hold, true);
            }
        }
        $window = self::dedupWindowProblem($config['dedup_window'] ?? DroverQueue::DEFAULT_DEDUP_WINDOW);
        if ($window !== null) {
            $problems[] = $window;
        }
        $metrics = $config['metrics'] ?? [];
        if (!is_array($metrics)) {
            $notArrays[] = 'drover.metrics is ' . get_debug_type($metrics);
        } else {
            foreach (array_diff(array_keys($metrics), ['record', 'trim', 'history', 'listen', 'token']) as $key) {
                $problems[] = "unknown key drover.metrics.$key (known: record, trim, history, listen, token)";
            }
        }
        $traces = $config['traces'] ?? [];
        if (!is_array($traces)) {
            $problems[] = "drover.traces must be an array (['endpoint' => null, 'propagate' => true]), got " . get_debug_type($traces);
        } else {
            foreach (array_diff(array_keys($traces), ['endpoint', 'service_name', 'propagate']) as $key) {
                $problems[] = "unknown key drover.traces.$key (known: endpoint, service_name, propagate)";
            }
            $endpoint = $traces['endpoint'] ?? null;
            if ($endpoint !== null && $endpoint !== '' && (!is_string($endpoint) || preg_match('#^http://[^/\s]+(/\S*)?$#', $endpoint) !== 1)) {
                $problems[] = 'drover.traces.endpoint must be the collector\'s OTLP/HTTP base URL, http://HOST:PORT (e.g. http://127.0.0.1:4318; https is not supported: export to a collector on the host, which forwards over TLS), got ' . var_export($endpoint, true);
            }
            $propagation = self::tracePropagationProblem($traces['propagate'] ?? true);
            if ($propagation !== null) {
                $problems[] = $propagation;
            }
        }
        if (!is_array($defaults)) {
            $notArrays[] = 'drover.defaults is ' . get_debug_type($defaults);
        }
        if (!is_array($environments)) {
            $notArrays[] = 'drover.environments is ' . get_debug_type($environments);
        } else {
            foreach ($environments as $key => $entry) {
                if (!is_array($entry)) {
                    $notArrays[] = "drover.environments.$key is " . get_debug_type($entry);
                }
            }
        }
        if ($notArrays !== []) {
            $problems[] = 'drover.defaults and drover.environments.* must be arrays of pools: ' . implode(', ', $notArrays);
            throw new InvalidConfig($problems);
        }
        $shape = [];
        foreach (['drover.defaults' => $defaults] + array_combine(array_map(fn ($k) => "drover.environments.$k", array_keys($environments)), $environments) as $where => $pools) {
            foreach ($pools as $name => $pool) {
                if (!is_array($pool)) {
                    $shape[] = "$where.$name must be an array of pool options (e.g. ['processes' => 2], or [] for the defaults), not " . get_debug_type($pool);
                }
            }
        }
        if ($shape !== []) {
            throw new InvalidConfig(array_merge($problems, $shape));
        }
        return $problems;
    }

    /**
     * The pools of $entry with drover.defaults applied as Horizon applies its defaults: every pool
     * of drover.defaults runs, with the entry's options for it on top, and the entry's own pools
     * run too. Each option is replaced whole; Horizon's array_replace_recursive would merge a list
     * index by index (queue ['mail'] over ['high', 'default'] giving ['mail', 'default']), which
     * is never what an override means, so lists are not merged here (the importer writes out the
     * list Horizon would have used where the two differ).
     *
     * @param array<string, mixed> $config
     * @param list<string> $problems found so far, reported together with the pools' own
     * @return array<string, array<string, mixed>>
     */
    private static function pools(array $config, string $entry, array $problems): array
    {
        $defaults = $config['defaults'] ?? [];
        $overrides = $config['environments'][$entry];
        $pools = [];
        foreach (array_unique(array_merge(array_keys($defaults), array_keys($overrides))) as $name) {
            $before = count($problems);
            $pool = array_merge(self::POOL_DEFAULTS, $defaults[$name] ?? [], $overrides[$name] ?? []);
            foreach (array_diff(array_keys($pool), array_keys(self::POOL_DEFAULTS)) as $key) {
                $problems[] = "pool $name: unknown key $key (known: " . implode(', ', array_keys(self::POOL_DEFAULTS)) . ')';
            }
            // Each queue once, where it first appears ('high,default,high' is high, then default):
            // the master refuses a list that names a queue twice.
            $pool['queue'] = array_values(array_unique(array_filter(array_map('trim', is_array($pool['queue']) ? $pool['queue'] : explode(',', (string) $pool['queue'])))));
            $pool['backoff'] = array_map('intval', is_array($pool['backoff']) ? array_values($pool['backoff']) : explode(',', (string) $pool['backoff']));
            if ($pool['balance'] === false || $pool['balance'] === null) {
                $pool['balance'] = 'off';
            }
            // The options the master reads, by its own limits and in its words.
            array_push($problems, ...PoolLimits::problems((string) $name, $pool));
            foreach (['processes', 'prefetch'] as $key) {
                if (filter_var($pool[$key], FILTER_VALIDATE_INT) !== false) {
                    $pool[$key] = (int) $pool[$key];
                }
            }
            if (array_filter($pool['backoff'], fn ($b) => $b < 0) !== []) {
                $problems[] = "pool $name: backoff must not be negative";
            }
            // The worker's own options, which the master never reads.
            foreach (['tries', 'max_jobs', 'max_time', 'sleep', 'rest'] as $key) {
                if (!is_numeric($pool[$key]) || $pool[$key] < 0) {
                    $problems[] = "pool $name: $key must be a number of at least 0";
                }
            }
            if ($pool['queue'] === []) {
                $problems[] = "pool $name: queue must name at least one queue";
            }
            if (!preg_match('/^[A-Za-z0-9_.-]+$/', (string) $name)) {
                $problems[] = "pool $name: a pool name may use letters, digits, '_', '.' and '-' only";
            }
            // How the processes cover the queues; the master refuses these too, but only once
            // it starts: said here, `php artisan drover` (and the importer) name them first.
            if (count($problems) === $before) {
                $problem = PoolLimits::coverageProblem(
                    $pool['balance'],
                    (int) $pool['processes'],
                    (int) $pool['min_processes'],
                    (int) ($pool['max_processes'] ?? $pool['processes']),
                    count($pool['queue']),
                );
                if ($problem !== null) {
                    $problems[] = "pool $name: $problem";
                }
            }
            $pools[(string) $name] = $pool;
        }
        if ($problems !== []) {
            throw new InvalidConfig($problems);
        }
        return $pools;
    }
}
