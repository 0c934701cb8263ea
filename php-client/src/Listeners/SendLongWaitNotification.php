<?php

namespace Drover\Listeners;

use Drover\Drover;
use Drover\Events\LongWaitDetected;
use Drover\Notifications\LongWaitDetected as LongWaitNotification;
use Drover\Notifications\SlackWebhookChannel;
use Illuminate\Notifications\AnonymousNotifiable;
use Illuminate\Support\Facades\Notification;

/**
 * Sends LongWaitDetected to the routes set with Drover::routeMailNotificationsTo() and
 * Drover::routeSlackNotificationsTo(). The cooldown is the master's (once per queue per
 * cooldown, fleet-wide), so this sends every time it is called.
 */
class SendLongWaitNotification
{
    public function handle(LongWaitDetected $event): void
    {
        $notifiable = new AnonymousNotifiable();
        if (Drover::$email !== null && Drover::$email !== '' && Drover::$email !== []) {
            $notifiable->route('mail', Drover::$email);
        }
        if (Drover::$slackWebhookUrl !== null && Drover::$slackWebhookUrl !== '') {
            $notifiable->route(SlackWebhookChannel::class, Drover::$slackWebhookUrl);
        }
        if ($notifiable->routes === []) {
            return;
        }
        Notification::send($notifiable, new LongWaitNotification($event->connection, $event->queue, $event->seconds));
    }
}
