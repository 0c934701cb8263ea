<?php

namespace Drover\Queue;

/**
 * A queue was paused, but a master that still answers the database did not confirm the pause in
 * time: its workers may still start jobs of the queue they hold. The pause stays in force.
 */
final class PauseNotConfirmed extends \RuntimeException
{
    /** @param list<object> $masters rows of drover.pause_unconfirmed */
    public static function by(string $queue, array $masters, float $waited): self
    {
        return new self(sprintf(
            'drover: queue %s is paused, but after %d s %s %s not confirmed it: its workers may still start jobs of %s that they hold, until it does or has been silent for two of its leases. See that master\'s log, or run `php artisan drover:status` on its host.',
            $queue,
            (int) $waited,
            self::describe($masters),
            count($masters) === 1 ? 'has' : 'have',
            $queue,
        ));
    }

    /** @param list<object> $masters rows of drover.pause_unconfirmed */
    public static function describe(array $masters): string
    {
        $names = array_map(
            static fn (object $m): string => sprintf('the master on %s (pid %d, last heard from %.0f s ago)', $m->hostname, $m->pid, max(0.0, (float) $m->silent_secs)),
            $masters,
        );
        return implode(' and ', $names);
    }
}
