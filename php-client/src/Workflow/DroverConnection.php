<?php

namespace Drover\Workflow;

use Drover\DroverQueue;
use Illuminate\Container\Container;

/**
 * The drover queue connection a workflow goes through (its dispatch, Drover::signal()): the one
 * named, else the application's default queue connection when its driver is drover, else the
 * first connection of config/queue.php whose driver is. Its database connection is where the
 * workflow is written, inside any transaction the application has open there.
 */
final class DroverConnection
{
    /**
     * @return array{0: string, 1: DroverQueue} the connection's name and its queue
     * @throws \LogicException when there is no such connection, or it is not drover's, saying what to configure
     */
    public static function resolve(?string $name = null): array
    {
        $app = Container::getInstance();
        $config = $app->make('config');
        if ($name === null || $name === '') {
            $default = (string) $config->get('queue.default');
            $name = ($config->get("queue.connections.$default.driver") === 'drover') ? $default : null;
            foreach ($name === null ? (array) $config->get('queue.connections', []) : [] as $candidate => $settings) {
                if (is_array($settings) && ($settings['driver'] ?? null) === 'drover') {
                    $name = (string) $candidate;
                    break;
                }
            }
            if ($name === null) {
                throw new \LogicException("drover: a workflow's steps are drover jobs, and no queue connection in config/queue.php has the drover driver; add one ('drover' => ['driver' => 'drover', 'connection' => null, 'queue' => 'default'])");
            }
        }
        $queue = $app->make('queue')->connection($name);
        if (!$queue instanceof DroverQueue) {
            throw new \LogicException("drover: queue connection '$name' is not a drover connection (its driver is " . var_export($config->get("queue.connections.$name.driver"), true) . "); a workflow's steps are drover jobs: name a connection whose driver is drover");
        }
        return [$name, $queue];
    }
}
