<?php

namespace Drover\Listeners;

use Drover\Drover;
use Drover\Events\LongWaitDetected;
use Drover\Events\ScheduledTaskAlert;
use Drover\Notifications\LongWaitDetected as LongWaitNotification;
use Drover\Notifications\SlackWebhookChannel;
use Illuminate\Notifications\AnonymousNotifiable;
use Illuminate\Support\Facades\Notification;

/**
 * Sends LongWaitDetected (and ScheduledTaskAlert, the same way) to the routes set with Drover::routeMailNotificationsTo() and
 * Drover::routeSlackNotificationsTo(). The cooldown is the master's (once per queue per
 * cooldown, fleet-wide), so this sends every time it is called.
 */
class SendLongWaitNotification
{
    public function handle(LongWaitDetected|ScheduledTaskAlert $event): void
    {
        $notification = $event instanceof ScheduledTaskAlert
            ? LongWaitNotification::forTask($event->summary, $event->failures, $event->seconds)
            : new LongWaitNotification($event->connection, $event->queue, $event->seconds, $event->group ?? null, $event->key ?? null);
        $routes = [];
        if (Drover::$email !== null && Drover::$email !== '' && Drover::$email !== []) {
            $routes['mail'] = Drover::$email;
        }
        if (Drover::$slackWebhookUrl !== null && Drover::$slackWebhookUrl !== '') {
            $routes[SlackWebhookChannel::class] = Drover::$slackWebhookUrl;
        }
        // Each channel on its own: a mail server that is down must not stop the Slack message.
        // A failure is thrown after the others were tried, so the command fails and the master
        // alerts again at its next check.
        $failures = [];
        foreach ($routes as $channel => $route) {
            try {
                Notification::send(
                    (new AnonymousNotifiable())->route($channel, $route),
                    $notification
                );
            } catch (\Throwable $e) {
                $failures[] = ($channel === 'mail' ? 'mail' : 'Slack') . ': ' . $e->getMessage();
            }
        }
        if ($failures !== []) {
            throw new \RuntimeException('drover: the long-wait notification was not sent by ' . implode('; ', $failures));
        }
    }
}
