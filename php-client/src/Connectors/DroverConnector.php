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
     * @param array{connection?: string|null, queue?: string, after_commit?: bool|null} $config
     */
    public function connect(array $config)
    {
        return new DroverQueue(
            $this->connections->connection($this->connectionName === null ? ($config['connection'] ?? null) : ($this->connectionName)($config['connection'] ?? null)),
            $config['queue'] ?? 'default',
            $config['after_commit'] ?? null,
            array_values((array) (config('drover.groups.hold') ?? [])),
            self::dedupWindow(config('drover.dedup_window') ?? 300),
        );
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
