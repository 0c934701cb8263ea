<?php

namespace Drover;

/**
 * Where drover's notifications go, set in a service provider's boot() as with Horizon:
 *
 *     Drover::routeMailNotificationsTo('ops@example.com');
 *     Drover::routeSlackNotificationsTo('https://hooks.slack.com/services/...', '#queues');
 *
 * With neither set, LongWaitDetected is still fired (listen to it yourself) but nothing is sent.
 */
class Drover
{
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
