<?php

namespace Drover\Notifications;

use Illuminate\Notifications\Messages\MailMessage;
use Illuminate\Notifications\Notification;

/**
 * The notification for a long wait, by mail and Slack (an incoming webhook), as Horizon's.
 */
class LongWaitDetected extends Notification
{
    public function __construct(
        public string $connection,
        public string $queue,
        public int $seconds,
        /** The ordered group whose job waited behind its head, when that is the longest wait. */
        public ?string $group = null,
        /** The limit key a job waited for, when that is the longest wait (docs/limits.md). */
        public ?string $key = null,
    ) {
    }

    /** @return list<string> */
    public function via($notifiable): array
    {
        $channels = [];
        if ($notifiable->routeNotificationFor('mail') !== null) {
            $channels[] = 'mail';
        }
        if ($notifiable->routeNotificationFor(SlackWebhookChannel::class) !== null) {
            $channels[] = SlackWebhookChannel::class;
        }
        return $channels;
    }

    public function summary(): string
    {
        $app = (string) config('app.name', 'Laravel');
        $held = match (true) {
            $this->group !== null => " (a job of group \"{$this->group}\", waiting behind its group's head)",
            $this->key !== null => " (a job waiting for its limit key \"{$this->key}\")",
            default => '',
        };
        return "[$app] The \"{$this->queue}\" queue on the \"{$this->connection}\" connection has a wait time of {$this->seconds} seconds$held.";
    }

    public function toMail($notifiable): MailMessage
    {
        return (new MailMessage())
            ->error()
            ->subject('Long Queue Wait Detected')
            ->greeting('Oh no! Something needs your attention.')
            ->line($this->summary());
    }

    /** @return array<string, mixed> the incoming webhook's JSON body */
    public function toSlackWebhook($notifiable, ?string $channel): array
    {
        $body = ['text' => 'Long Queue Wait Detected: ' . $this->summary()];
        if ($channel !== null && $channel !== '') {
            $body['channel'] = $channel;
        }
        return $body;
    }
}
