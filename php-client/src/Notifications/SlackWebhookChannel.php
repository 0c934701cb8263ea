<?php

namespace Drover\Notifications;

use Drover\Drover;
use Illuminate\Notifications\Notification;
use RuntimeException;

/**
 * Posts a notification's `toSlackWebhook()` body to a Slack incoming webhook: the route is the
 * webhook URL. PHP's own HTTP stream, so neither Guzzle nor laravel/slack-notification-channel
 * is needed (Laravel 8 from Debian has neither).
 */
class SlackWebhookChannel
{
    public function send($notifiable, Notification $notification): void
    {
        $url = $notifiable->routeNotificationFor(self::class, $notification);
        if (!is_string($url) || $url === '') {
            return;
        }
        $body = json_encode($notification->toSlackWebhook($notifiable, Drover::$slackChannel), JSON_THROW_ON_ERROR);
        $context = stream_context_create(['http' => [
            'method' => 'POST',
            'header' => "Content-Type: application/json\r\n",
            'content' => $body,
            'timeout' => 10,
            'ignore_errors' => true,
        ]]);
        $answer = @file_get_contents($url, false, $context);
        // The last status line: after a redirect the first one is the redirect's.
        $status = 'no answer';
        foreach ($http_response_header ?? [] as $line) {
            if (str_starts_with($line, 'HTTP/')) {
                $status = $line;
            }
        }
        if ($answer === false || !preg_match('/^HTTP\/\S+ 2\d\d/', $status)) {
            throw new RuntimeException("drover: the Slack webhook answered $status");
        }
    }
}
