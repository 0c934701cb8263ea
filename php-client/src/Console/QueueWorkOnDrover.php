<?php

namespace Drover\Console;

use Illuminate\Console\Events\CommandStarting;
use Illuminate\Contracts\Config\Repository;
use Illuminate\Contracts\Console\Kernel;
use Illuminate\Contracts\Container\Container;
use Symfony\Component\Console\Input\InputInterface;

/**
 * `queue:work` and `queue:listen` on a drover connection: what the developer means is "run this
 * queue here, in the foreground", so that is what happens. Laravel's own loop cannot serve a drover
 * queue (the master pushes jobs to its workers; nothing pops them), so before the command starts
 * (CommandStarting) this process is replaced by a drover master for that connection alone: one
 * worker started by exec, the queues, tries, timeout, memory, backoff, sleep, rest and force of the
 * command line, and `--once`, `--stop-when-empty`, `--max-jobs`, `--max-time` for the master.
 *
 * `queue:listen` means "pick up my edits": its worker runs one job and is replaced (a fresh process
 * per job, as Laravel's listen starts `queue:work --once` per job), and a worker whose loaded PHP
 * files changed since it booted hands its next job back and is replaced before running it
 * (Worker\CodeWatch), so an edited job, listener or provider runs on the next job.
 *
 * Everything else about the master is config/drover.php's: the database (or the embedded
 * PostgreSQL), the state directory, the lease. Ctrl-C stops it gracefully (running job finishes);
 * a second Ctrl-C stops at once.
 */
final class QueueWorkOnDrover
{
    private const COMMANDS = ['queue:work', 'queue:listen'];

    /** The pool the foreground master runs; its options reach the worker in DROVER_POOL_OPTIONS. */
    public const POOL = 'foreground';

    public function __construct(private readonly Container $app)
    {
    }

    public function __invoke(CommandStarting $event): void
    {
        if (!in_array($event->command, self::COMMANDS, true) || $event->input === null) {
            return;
        }
        $input = $this->bound($event);
        if ($input === null) {
            return; // input the command itself will refuse: let it
        }
        /** @var Repository $config */
        $config = $this->app['config'];
        $connection = $input->getArgument('connection');
        $connection = is_string($connection) && $connection !== '' ? $connection : (string) $config->get('queue.default');
        $asked = $connection;
        $connection = self::droverConnection($config, $connection);
        if ($connection === null) {
            return;
        }
        $listen = $event->command === 'queue:listen';
        try {
            $options = self::poolOptions($connection, (array) $config->get("queue.connections.$connection"), $input, $listen);
            $stop = self::stopFlags($input);
            $drover = (array) $config->get('drover', []);
            // Only this pool, exactly as the command line says (drover.defaults are for the
            // configured pools; queue:work's defaults are the ones that apply here).
            $drover['defaults'] = [];
            $drover['environments'] = ['*' => [self::POOL => $options]];
            // The database this connection dispatches to is the one to serve.
            $database = $config->get("queue.connections.$connection.connection");
            if (is_string($database) && $database !== '') {
                $drover['database'] = $database;
            }
            $launch = MasterLaunch::prepare($this->app, $drover);
            $contract = $launch->contract;
            // A reload (SIGHUP, drover:restart) re-reads this file, not config/drover.php's pools.
            $contract['reload_command'] = null;
            $contract['pools'][0]['env'] = array_filter([
                'DROVER_POOL_OPTIONS' => json_encode($options, JSON_UNESCAPED_SLASHES),
                'DROVER_RELOAD_ON_CHANGE' => $listen ? '1' : null,
                // A line per job on the terminal, as queue:work prints (Worker\JobLines).
                'DROVER_FOREGROUND' => '1',
            ]);
            $launch = $launch->withContract($contract);
            $asRoot = RootStart::decide(RootStart::euid(), $contract['user'], $this->app->environment());
            if ($asRoot === RootStart::BECOME_USER) {
                throw new \RuntimeException("it runs as root, and drover.user is {$contract['user']}: run it as that user (`sudo -u {$contract['user']} php artisan {$event->command} ...`), so that nothing of the application runs as root (docs/security.md)");
            }
            if ($asRoot === RootStart::REFUSE) {
                throw new \RuntimeException(RootStart::refusal());
            }
            if (RootStart::euid() === 0) {
                fwrite(STDERR, RootStart::warning() . "\n");
            }
            // Its own file: beside a running service, whose config.json stays as it is, the master
            // is then refused as a second master on the state directory.
            $file = $launch->write('foreground.json');
        } catch (\InvalidArgumentException | \RuntimeException $e) {
            throw new \RuntimeException("{$event->command} on the drover connection $connection: " . $e->getMessage(), 0, $e);
        }
        $queues = implode(', ', $options['queue']);
        $event->output->writeln("<info>drover:</info> {$event->command} on connection $connection: a drover master in the foreground, 1 worker, queues $queues" . ($listen ? ' (a fresh worker per job, and after every code change)' : '') . '. Ctrl-C stops it.');
        if ($asked !== $connection) {
            $behind = array_values(array_diff((array) $config->get("queue.connections.$asked.connections", []), [$connection]));
            $event->output->writeln("<comment>drover:</comment> $asked is a failover connection whose first connection is $connection; jobs that fell over to " . ($behind === [] ? 'the others' : implode(', ', $behind)) . ' need their own queue:work.');
        }
        throw new \RuntimeException($launch->exec(array_merge(['run', '--config', $file], $stop)));
    }

    /**
     * The drover connection a worker of $connection would pop: $connection itself when its driver
     * is drover, the first connection of a `failover` connection (Laravel 12), followed through
     * nested failovers; null when that is any other driver (Laravel's own worker serves it).
     * Config only: nothing is connected to.
     */
    public static function droverConnection(Repository $config, string $connection): ?string
    {
        $seen = [];
        while (!isset($seen[$connection])) {
            $seen[$connection] = true;
            $driver = $config->get("queue.connections.$connection.driver");
            if ($driver === 'drover') {
                return $connection;
            }
            $first = $driver === 'failover' ? (((array) $config->get("queue.connections.$connection.connections", []))[0] ?? null) : null;
            if (!is_string($first) || $first === '') {
                return null;
            }
            $connection = $first;
        }
        return null; // failover connections in a loop: Laravel's to refuse
    }

    /**
     * The foreground pool's options from the command line, as queue:work reads its flags.
     *
     * @param array<string, mixed> $connectionConfig config('queue.connections.NAME')
     * @return array<string, mixed>
     */
    public static function poolOptions(string $connection, array $connectionConfig, InputInterface $input, bool $listen): array
    {
        $option = fn (string $name, $default = null) => $input->hasOption($name) ? $input->getOption($name) : $default;
        $queue = $option('queue');
        $queues = is_string($queue) && $queue !== '' ? $queue : (string) ($connectionConfig['queue'] ?? 'default');
        $queues = array_values(array_filter(array_map('trim', explode(',', $queues)), 'strlen'));
        $number = function (string $name, int $default) use ($option): int {
            $value = (string) ($option($name) ?? $default);
            if (!ctype_digit($value) || strlen($value) > 9) {
                throw new \InvalidArgumentException("--$name must be a whole number, got '$value'");
            }
            return (int) $value;
        };
        // --sleep and --rest take fractions, as Laravel's do.
        $seconds = function (string $name, int $default) use ($option): float {
            $value = (string) ($option($name) ?? $default);
            if (!is_numeric($value) || (float) $value < 0 || (float) $value > 86400) {
                throw new \InvalidArgumentException("--$name must be a number of seconds from 0 to 86400, got '$value'");
            }
            return (float) $value;
        };
        foreach (['stop-when-empty-for' => 'use --stop-when-empty (or --max-time)', 'json' => 'the worker prints text lines'] as $unsupported => $instead) {
            $given = $option($unsupported);
            if ($given !== null && $given !== false && $given !== '0' && $given !== 0) {
                throw new \InvalidArgumentException("--$unsupported is not supported on a drover connection: $instead");
            }
        }
        $backoff = (string) ($option('backoff') ?? $option('delay') ?? '0');
        $steps = array_map('trim', explode(',', $backoff));
        foreach ($steps as $step) {
            if (!ctype_digit($step)) {
                throw new \InvalidArgumentException("--backoff must be seconds, or comma-separated seconds (e.g. 1,5,10), got '$backoff'");
            }
        }
        return [
            'connection' => $connection,
            'queue' => $queues ?: ['default'],
            'processes' => 1,
            'prefetch' => 1,
            'spawn' => 'exec',
            'tries' => $number('tries', 1),
            // 0: no limit, as queue:work's --timeout=0.
            'timeout' => $number('timeout', 60),
            'memory' => $number('memory', 128),
            'backoff' => array_map('intval', $steps),
            // The nap while paused, in whole seconds (at least the fraction asked).
            'sleep' => (int) ceil($seconds('sleep', 3)),
            'rest' => $seconds('rest', 0),
            'force' => (bool) $option('force', false),
            // queue:listen: one job per process, as Laravel's listen runs `queue:work --once`.
            'max_jobs' => $listen ? 1 : 0,
        ];
    }

    /**
     * The master's flags for stopping by itself: `--once` is one job then stop (or stop at once
     * when there is none, as queue:work --once does after its sleep); the others pass through.
     *
     * @return list<string>
     */
    public static function stopFlags(InputInterface $input): array
    {
        $option = fn (string $name) => $input->hasOption($name) ? $input->getOption($name) : null;
        if ($option('once')) {
            return ['--max-jobs', '1', '--stop-when-empty'];
        }
        return DroverCommand::stopFlags($option('stop-when-empty'), $option('max-jobs'), $option('max-time'));
    }

    /** The command's input, bound to the command's own definition, or null if it does not bind. */
    private function bound(CommandStarting $event): ?InputInterface
    {
        try {
            $command = $this->app[Kernel::class]->all()[$event->command] ?? null;
            if ($command === null) {
                return null;
            }
            $command->mergeApplicationDefinition();
            $input = clone $event->input;
            $input->bind($command->getDefinition());
            return $input;
        } catch (\Throwable) {
            return null;
        }
    }
}
