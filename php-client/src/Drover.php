<?php

namespace Drover;

/**
 * Where drover's notifications go, set in a service provider's boot() as with Horizon:
 *
 *     Drover::routeMailNotificationsTo('ops@example.com');
 *     Drover::routeSlackNotificationsTo('https://hooks.slack.com/services/...', '#queues');
 *
 * With neither set, LongWaitDetected is still fired (listen to it yourself) but nothing is sent.
 *
 * And the application's doors to workflows (docs/workflows.md): Drover::workflow() declares one,
 * Drover::signal() lets the steps waiting for a signal go on.
 */
class Drover
{
    /**
     * Declares workflow $name, a graph of jobs: add steps, then dispatch() it
     * (Workflow\PendingWorkflow).
     */
    public static function workflow(string $name): Workflow\PendingWorkflow
    {
        return new Workflow\PendingWorkflow($name);
    }

    /**
     * Sends signal $signal, with $data (JSON-encoded; null for none), to the workflows named
     * $workflow that have not ended — or to the workflow of that id (an int, or digits): each
     * keeps it (the first of a name), and its steps waiting for it run. A signal sent before a
     * step waits for it is kept for it. On the drover queue connection's database connection
     * (Workflow\DroverConnection), inside any transaction open there.
     *
     * @return int how many workflows took it (0: none of that name or id is running)
     * @throws \InvalidArgumentException for a signal name that is not 1 to 200 characters, or data that cannot be JSON or is over 1 MiB
     */
    public static function signal(string|int $workflow, string $signal, mixed $data = null, ?string $connection = null): int
    {
        $length = preg_match('//u', $signal) === 1 ? mb_strlen($signal, 'UTF-8') : 0;
        if ($length < 1 || $length > Workflow\Graph::MAX_NAME) {
            throw new \InvalidArgumentException('drover: a signal\'s name must be 1 to ' . Workflow\Graph::MAX_NAME . " characters of UTF-8, got " . ($length === 0 ? 'an empty or unreadable one' : "$length"));
        }
        try {
            $json = $data === null ? null : json_encode($data, JSON_THROW_ON_ERROR | JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES | JSON_PRESERVE_ZERO_FRACTION);
        } catch (\JsonException $e) {
            throw new \InvalidArgumentException("drover: signal '$signal' carries data that cannot be JSON ({$e->getMessage()}); send arrays, strings, numbers, booleans or null", 0, $e);
        }
        if ($json !== null && strlen($json) > Workflow\Workflows::MAX_DATA) {
            throw new \InvalidArgumentException("drover: signal '$signal' carries " . strlen($json) . ' bytes of JSON; at most ' . Workflow\Workflows::MAX_DATA . ' (1 MiB) are kept: send a key to where the data is instead');
        }
        [, $queue] = Workflow\DroverConnection::resolve($connection);
        return (new Workflow\Workflows($queue->getDatabase()))->signal((string) $workflow, $signal, $json);
    }

    /** @var string|array<int, string>|null */
    public static $email = null;

    public static ?string $slackWebhookUrl = null;

    public static ?string $slackChannel = null;

    /** @param string|array<int, string> $email */
    public static function routeMailNotificationsTo($email): void
    {
        static::$email = $email;
    }

    public static function routeSlackNotificationsTo(string $url, ?string $channel = null): void
    {
        static::$slackWebhookUrl = $url;
        static::$slackChannel = $channel;
    }
}
