<?php

namespace Drover\Config;

/**
 * Reads config/drover.php: the pools for an environment (defaults merged with that environment's
 * overrides), every key checked. Unknown keys are refused with their names, all at once.
 */
final class Pools
{
    public const TOP_KEYS = ['binary', 'database', 'embedded', 'state_dir', 'app_path', 'auto_migrate', 'lease', 'shutdown_grace', 'poll_interval', 'postgres_user', 'user', 'restart_failures', 'restart_pause', 'defaults', 'environments'];

    public const POOL_DEFAULTS = [
        'connection' => 'drover',
        'queue' => ['default'],
        'processes' => 1,
        'tries' => 1,
        'timeout' => 60,
        'memory' => 128,
        'backoff' => 0,
        'max_jobs' => 0,
        'max_time' => 0,
        'prefetch' => 1,
        'nice' => 0,
        'boot_timeout' => 60,
        'balance' => 'off',
        'min_processes' => 1,
        'max_processes' => null,
        'balance_max_shift' => 1,
        'balance_cooldown' => 3,
        'autoscaling_strategy' => 'time',
        'scale_down_delay' => 10,
        'sleep' => 3,
        'force' => false,
        'rest' => 0,
    ];

    /**
     * @param array<string, mixed> $config config('drover')
     * @return array<string, array<string, mixed>> pool name => complete options
     */
    public static function resolve(array $config, string $environment): array
    {
        $problems = [];
        foreach (array_diff(array_keys($config), self::TOP_KEYS) as $key) {
            $problems[] = "unknown key drover.$key (known: " . implode(', ', self::TOP_KEYS) . ')';
        }
        $defaults = $config['defaults'] ?? [];
        $overrides = $config['environments'][$environment] ?? [];
        if (!is_array($defaults) || !is_array($overrides)) {
            throw new InvalidConfig(['drover.defaults and drover.environments.* must be arrays of pools']);
        }
        $pools = [];
        foreach (array_unique(array_merge(array_keys($defaults), array_keys($overrides))) as $name) {
            $pool = array_merge(self::POOL_DEFAULTS, $defaults[$name] ?? [], $overrides[$name] ?? []);
            foreach (array_diff(array_keys($pool), array_keys(self::POOL_DEFAULTS)) as $key) {
                $problems[] = "pool $name: unknown key $key (known: " . implode(', ', array_keys(self::POOL_DEFAULTS)) . ')';
            }
            $pool['queue'] = array_values(array_filter(array_map('trim', is_array($pool['queue']) ? $pool['queue'] : explode(',', (string) $pool['queue']))));
            $pool['backoff'] = array_map('intval', is_array($pool['backoff']) ? array_values($pool['backoff']) : explode(',', (string) $pool['backoff']));
            foreach (['processes', 'prefetch'] as $key) {
                if (filter_var($pool[$key], FILTER_VALIDATE_INT) === false || (int) $pool[$key] < 1) {
                    $problems[] = "pool $name: $key must be an integer of at least 1";
                }
                $pool[$key] = (int) $pool[$key];
            }
            if ($pool['prefetch'] > 256) {
                $problems[] = "pool $name: prefetch must be at most 256";
            }
            if (array_filter($pool['backoff'], fn ($b) => $b < 0) !== []) {
                $problems[] = "pool $name: backoff must not be negative";
            }
            foreach (['tries', 'timeout', 'memory', 'max_jobs', 'max_time', 'sleep', 'rest'] as $key) {
                if (!is_numeric($pool[$key]) || $pool[$key] < 0) {
                    $problems[] = "pool $name: $key must be a number of at least 0";
                }
            }
            if (filter_var($pool['nice'], FILTER_VALIDATE_INT) === false || (int) $pool['nice'] < -20 || (int) $pool['nice'] > 19) {
                $problems[] = "pool $name: nice must be an integer between -20 and 19";
            }
            if (!is_numeric($pool['boot_timeout']) || $pool['boot_timeout'] <= 0) {
                $problems[] = "pool $name: boot_timeout must be a number of seconds above 0";
            }
            if ($pool['balance'] === false || $pool['balance'] === null) {
                $pool['balance'] = 'off';
            }
            if (!in_array($pool['balance'], ['off', 'simple', 'auto'], true)) {
                $problems[] = "pool $name: balance must be off, simple or auto";
            }
            if (!in_array($pool['autoscaling_strategy'], ['time', 'size'], true)) {
                $problems[] = "pool $name: autoscaling_strategy must be time or size";
            }
            foreach (['min_processes', 'balance_max_shift'] as $key) {
                if (filter_var($pool[$key], FILTER_VALIDATE_INT) === false || (int) $pool[$key] < 1) {
                    $problems[] = "pool $name: $key must be an integer of at least 1";
                }
            }
            if ($pool['max_processes'] !== null && (filter_var($pool['max_processes'], FILTER_VALIDATE_INT) === false || (int) $pool['max_processes'] < 1)) {
                $problems[] = "pool $name: max_processes must be an integer of at least 1, or null for processes";
            }
            if (!is_numeric($pool['balance_cooldown']) || $pool['balance_cooldown'] <= 0) {
                $problems[] = "pool $name: balance_cooldown must be a number of seconds above 0";
            }
            if (!is_numeric($pool['scale_down_delay']) || $pool['scale_down_delay'] < 0) {
                $problems[] = "pool $name: scale_down_delay must be a number of seconds, 0 or more";
            }
            if ($pool['queue'] === []) {
                $problems[] = "pool $name: queue must name at least one queue";
            }
            if (!preg_match('/^[A-Za-z0-9_.-]+$/', (string) $name)) {
                $problems[] = "pool $name: a pool name may use letters, digits, '_', '.' and '-' only";
            }
            $pools[(string) $name] = $pool;
        }
        if ($pools === []) {
            $problems[] = 'no pools: define at least one under drover.defaults';
        }
        if ($problems !== []) {
            throw new InvalidConfig($problems);
        }
        return $pools;
    }
}
