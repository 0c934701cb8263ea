<?php

namespace Drover\Connectors;

use Drover\Config\InvalidConfig;
use Drover\Config\Pools;
use Drover\DroverQueue;
use Illuminate\Database\ConnectionResolverInterface;
use Illuminate\Queue\Connectors\ConnectorInterface;

/** Builds the `drover` queue from a `config/queue.php` connection. */
class DroverConnector implements ConnectorInterface
{
    /**
     * @param \Closure(?string): ?string|null $connectionName the database connection drover's
     *        tables are on, given the queue connection's (Config\Embedded::connectionName)
     */
    public function __construct(protected ConnectionResolverInterface $connections, protected ?\Closure $connectionName = null)
    {
    }

    /**
     * @param array{connection?: string|null, queue?: string, after_commit?: bool|null, lose_dispatches_on_database_crash?: bool} $config
     */
    public function connect(array $config)
    {
        return new DroverQueue(
            $this->connections->connection($this->connectionName === null ? ($config['connection'] ?? null) : ($this->connectionName)($config['connection'] ?? null)),
            $config['queue'] ?? 'default',
            $config['after_commit'] ?? null,
            array_values((array) (config('drover.groups.hold') ?? [])),
            self::dedupWindow(config('drover.dedup_window') ?? DroverQueue::DEFAULT_DEDUP_WINDOW),
            self::losesDispatchesOnCrash($config['lose_dispatches_on_database_crash'] ?? false),
            array_values(array_map('strval', (array) (config('drover.fair') ?? []))),
            self::propagatesTraces(config('drover.traces.propagate') ?? true),
        );
    }

    /** drover.traces.propagate, checked as `php artisan drover` checks it (Pools); env()'s "false" is false. */
    private static function propagatesTraces(mixed $value): bool
    {
        $problem = Pools::tracePropagationProblem($value);
        if ($problem !== null) {
            throw new InvalidConfig([$problem]);
        }
        return is_bool($value) ? $value : filter_var($value, FILTER_VALIDATE_BOOLEAN);
    }

    /**
     * The opt-in asynchronous commit of a dispatch (DroverQueue::$losesDispatchesOnCrash): true
     * or false only, so that a string from env() ('false') never turns it on by accident.
     */
    private static function losesDispatchesOnCrash(mixed $value): bool
    {
        if (!is_bool($value)) {
            throw new \InvalidArgumentException(
                'config/queue.php: the drover connection\'s lose_dispatches_on_database_crash must be true or false, got '
                . var_export($value, true) . ' (cast an env() value with (bool) or filter_var(..., FILTER_VALIDATE_BOOLEAN))'
            );
        }
        return $value;
    }

    /** drover.dedup_window, checked as `php artisan drover` checks it (Pools). */
    private static function dedupWindow(mixed $value): int
    {
        $problem = Pools::dedupWindowProblem($value);
        if ($problem !== null) {
            throw new InvalidConfig([$problem]);
        }
        return (int) $value;
    }
}
