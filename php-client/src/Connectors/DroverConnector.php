<?php

namespace Drover\Connectors;

use Drover\DroverQueue;
use Illuminate\Database\ConnectionResolverInterface;
use Illuminate\Queue\Connectors\ConnectorInterface;

/** Builds the `drover` queue from a `config/queue.php` connection. */
class DroverConnector implements ConnectorInterface
{
    public function __construct(protected ConnectionResolverInterface $connections)
    {
    }

    /**
     * @param array{connection?: string|null, queue?: string, after_commit?: bool|null} $config
     */
    public function connect(array $config)
    {
        return new DroverQueue(
            $this->connections->connection($config['connection'] ?? null),
            $config['queue'] ?? 'default',
            $config['after_commit'] ?? null,
            array_values((array) (config('drover.groups.hold') ?? [])),
            self::dedupWindow(config('drover.dedup_window') ?? 300),
        );
    }

    /** drover.dedup_window: whole seconds, 1 to a day. */
    private static function dedupWindow(mixed $value): int
    {
        if (!is_int($value) && !(is_string($value) && ctype_digit($value))) {
            throw new \InvalidArgumentException('drover: config drover.dedup_window must be a whole number of seconds, got ' . var_export($value, true));
        }
        $seconds = (int) $value;
        if ($seconds < 1 || $seconds > 86400) {
            throw new \InvalidArgumentException("drover: config drover.dedup_window must be from 1 to 86400 seconds, got $seconds");
        }
        return $seconds;
    }
}
