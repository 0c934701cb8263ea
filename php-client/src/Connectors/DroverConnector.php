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
        );
    }
}
