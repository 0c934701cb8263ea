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
        /** A scheduled task that needs attention instead of a queue (ScheduledTaskAlert): its summary. */
        public ?string $task = null,
        /** Its runs failed since its last success; 0 when it is overdue. */
        public int $failures = 0,
    ) {
    }

    /** The alert for a scheduled task (`$seconds`: since its last success, if it had one). */
    public static function forTask(string $summary, int $failures, ?int $seconds): self
    {
        return new self('schedule', '', $seconds ?? -1, null, null, $summary, $failures);
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
        if ($this->task !== null) {
            $since = $this->seconds < 0 ? 'it has never succeeded' : "its last success was {$this->seconds} seconds ago";
            return $this->failures > 0
                ? "[$app] The scheduled task \"{$this->task}\" failed {$this->failures} times in a row; $since."
                : "[$app] The scheduled task \"{$this->task}\" is overdue: $since.";
        }
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
            ->subject($this->task !== null ? 'Scheduled Task Needs Attention' : 'Long Queue Wait Detected')
            ->greeting('Oh no! Something needs your attention.')
            ->line($this->summary());
    }

    /** @return array<string, mixed> the incoming webhook's JSON body */
    public function toSlackWebhook($notifiable, ?string $channel): array
    {
        $body = ['text' => ($this->task !== null ? 'Scheduled Task Needs Attention: ' : 'Long Queue Wait Detected: ') . $this->summary()];
        if ($channel !== null && $channel !== '') {
            $body['channel'] = $channel;
        }
        return $body;
    }
}
