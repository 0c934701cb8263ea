<?php

namespace Drover\Console;

use Illuminate\Console\Events\CommandStarting;
use Illuminate\Contracts\Config\Repository;
use Illuminate\Contracts\Console\Kernel;
use Illuminate\Contracts\Container\Container;

/**
 * Refuses `queue:work` and `queue:listen` on a drover connection before they start: their loop
 * would call pop(), which a drover queue cannot serve (the master pushes jobs to its workers), log
 * an error every few seconds and never exit. Thrown from CommandStarting, the message is rendered
 * by artisan and the command exits 1 at once.
 */
final class QueueWorkGuard
{
    private const COMMANDS = ['queue:work', 'queue:listen'];

    public function __construct(private readonly Container $app)
    {
    }

    public function __invoke(CommandStarting $event): void
    {
        if (!in_array($event->command, self::COMMANDS, true)) {
            return;
        }
        $connection = $this->connectionOf($event);
        /** @var Repository $config */
        $config = $this->app['config'];
        $connection ??= (string) $config->get('queue.default');
        if ($config->get("queue.connections.$connection.driver") !== 'drover') {
            return;
        }
        throw new \RuntimeException(
            "drover: `{$event->command}` cannot run the queue connection $connection: its jobs are pushed to workers by the drover master, nothing pops them. "
            . 'Run `php artisan drover` (or the drover service) instead; it starts the workers of config/drover.php.'
        );
    }

    /** The command's `connection` argument, read with the command's own definition. */
    private function connectionOf(CommandStarting $event): ?string
    {
        if ($event->input === null) {
            return null;
        }
        try {
            $command = $this->app[Kernel::class]->all()[$event->command] ?? null;
            if ($command === null) {
                return null;
            }
            $command->mergeApplicationDefinition();
            $input = clone $event->input;
            $input->bind($command->getDefinition());
            $connection = $input->getArgument('connection');
            return is_string($connection) && $connection !== '' ? $connection : null;
        } catch (\Throwable) {
            // Input the command itself will refuse: let it.
            return null;
        }
    }
}
