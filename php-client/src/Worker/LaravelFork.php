<?php

namespace Drover\Worker;

use Illuminate\Contracts\Debug\ExceptionHandler;
use Illuminate\Contracts\Foundation\Application;

/**
 * What a booted Laravel application needs to be forked from (fork mode, docs/decisions/0001):
 *
 * - prepare(), in the zygote before its first fork: warm what every job goes through (the
 *   services a worker resolves, the framework's queue classes, the application's queued classes),
 *   so the workers share them copy-on-write instead of each loading them; then let go of
 *   everything a worker must not share — open connections (database, Redis), log streams, mail
 *   transports, cache stores, queue connections, auth guards — and compact the heap.
 * - afterFork(), in each worker: anything that still holds a connection is dropped without
 *   closing it (closing a shared socket would end the zygote's session for every worker), so the
 *   worker opens its own on first use. The random seed is reset by Zygote itself.
 *
 * The list follows what Laravel Octane resets between requests, limited to what a queue worker
 * process carries. docs/decisions/0001 names the test of each reset (tests/forking.rs); the
 * queue connections, mailers and auth guards the zygote forgets are the ones no test observes
 * (the fixture opens none of them at boot).
 */
final class LaravelFork
{
    /** Services every worker resolves: resolved once here, shared by all. */
    private const SERVICES = [
        'events', 'queue', 'queue.worker', 'queue.failer', 'cache', 'db', 'log', 'config',
        'files', 'encrypter', 'translator', 'validator', 'view', 'mail.manager',
        ExceptionHandler::class, \Illuminate\Contracts\Bus\Dispatcher::class,
        \Illuminate\Contracts\Bus\QueueingDispatcher::class,
    ];

    /** The framework's classes a job passes through in a worker (those that exist in this Laravel). */
    private const CLASSES = [
        \Illuminate\Queue\Worker::class, \Illuminate\Queue\WorkerOptions::class,
        \Illuminate\Queue\Jobs\Job::class, \Illuminate\Queue\Jobs\JobName::class,
        \Illuminate\Queue\CallQueuedHandler::class, \Illuminate\Queue\CallQueuedClosure::class,
        \Illuminate\Queue\SerializesModels::class, \Illuminate\Queue\SerializesAndRestoresModelIdentifiers::class,
        \Illuminate\Queue\InteractsWithQueue::class, \Illuminate\Queue\MaxAttemptsExceededException::class,
        \Illuminate\Queue\Events\JobProcessing::class, \Illuminate\Queue\Events\JobProcessed::class,
        \Illuminate\Queue\Events\JobFailed::class, \Illuminate\Queue\Events\JobExceptionOccurred::class,
        \Illuminate\Queue\Events\JobReleasedAfterException::class, \Illuminate\Queue\Events\JobPopping::class,
        \Illuminate\Queue\Events\JobPopped::class, \Illuminate\Queue\Events\JobTimedOut::class,
        \Illuminate\Queue\Events\Looping::class, \Illuminate\Queue\Events\WorkerStopping::class,
        \Illuminate\Queue\TimeoutExceededException::class, \Illuminate\Queue\ManuallyFailedException::class,
        \Illuminate\Bus\Queueable::class, \Illuminate\Bus\Batchable::class, \Illuminate\Bus\Batch::class,
        \Illuminate\Bus\DatabaseBatchRepository::class, \Illuminate\Bus\UniqueLock::class,
        \Illuminate\Pipeline\Pipeline::class, \Illuminate\Contracts\Queue\ShouldQueue::class,
        \Illuminate\Database\Eloquent\ModelIdentifier::class, \Illuminate\Contracts\Database\ModelIdentifier::class,
        \Illuminate\Queue\Middleware\WithoutOverlapping::class, \Illuminate\Queue\Middleware\RateLimited::class,
        \Illuminate\Queue\Middleware\ThrottlesExceptions::class,
        \Illuminate\Events\CallQueuedListener::class, \Illuminate\Mail\SendQueuedMailable::class,
        \Illuminate\Notifications\SendQueuedNotifications::class, \Illuminate\Broadcasting\BroadcastEvent::class,
        \Illuminate\Database\PostgresConnection::class, \Illuminate\Database\Query\Builder::class,
        \Illuminate\Database\Query\Grammars\PostgresGrammar::class, \Illuminate\Database\Query\Processors\PostgresProcessor::class,
        \Illuminate\Database\Eloquent\Builder::class, \Illuminate\Database\Eloquent\Collection::class,
        \Illuminate\Support\Carbon::class, \Carbon\Carbon::class,
        \Drover\Jobs\DroverJob::class, \Drover\Worker\LaravelWorker::class, \Drover\Worker\Feeder::class,
        \Drover\DroverQueue::class, \Drover\Protocol\Channel::class, \Drover\Protocol\ChannelClosed::class,
    ];

    /** Where an application keeps classes that run on queues (and what they touch). */
    private const APP_DIRECTORIES = ['Jobs', 'Listeners', 'Mail', 'Notifications', 'Events', 'Models'];

    /**
     * Connections a worker found it inherited, kept referenced for its life so their destructors
     * never run in it: a PDO's destructor would say goodbye on the zygote's socket.
     *
     * @var list<object>
     */
    private static array $inherited = [];

    public function __construct(private readonly Application $app)
    {
    }

    /** In the zygote, once, before the first fork; throws what makes this application unforkable. */
    public function prepare(): void
    {
        $why = $this->unforkable();
        if ($why !== null) {
            throw new \RuntimeException($why);
        }
        $this->warm();
        $this->letGo();
        gc_collect_cycles();
        gc_mem_caches();
    }

    /**
     * A persistent connection outlives `purge`: PHP keeps it for the process, and every worker
     * forked after would reuse the zygote's socket. Such connections are named, and the pool
     * starts its workers by exec.
     */
    private function unforkable(): ?string
    {
        $config = $this->app['config'];
        $persistent = [];
        foreach ((array) $config->get('database.connections', []) as $name => $connection) {
            if (!empty(((array) ($connection['options'] ?? []))[\PDO::ATTR_PERSISTENT] ?? false)) {
                $persistent[] = "database connection $name (PDO::ATTR_PERSISTENT)";
            }
        }
        foreach ((array) $config->get('database.redis', []) as $name => $connection) {
            if (is_array($connection) && !empty($connection['persistent'])) {
                $persistent[] = "Redis connection $name (persistent)";
            }
        }
        if ($persistent === []) {
            return null;
        }
        return 'persistent connections cannot be shared with forked workers: ' . implode(', ', $persistent)
            . '; turn persistence off for the workers or set the pool\'s spawn to exec';
    }

    private function warm(): void
    {
        foreach (self::SERVICES as $abstract) {
            if ($this->app->bound($abstract)) {
                try {
                    $this->app->make($abstract);
                } catch (\Throwable) {
                    // Not usable in this application (no APP_KEY for the encrypter, no views):
                    // a worker that needs it fails on its own, as without a zygote.
                }
            }
        }
        foreach (self::CLASSES as $class) {
            class_exists($class) || interface_exists($class) || trait_exists($class);
        }
        foreach ($this->applicationClasses() as $class) {
            try {
                class_exists($class);
            } catch (\Throwable) {
                // A file that does not load on its own is loaded (or fails) in the worker.
            }
        }
    }

    /** @return list<string> the classes under app/Jobs, app/Listeners, … by the PSR-4 convention */
    private function applicationClasses(): array
    {
        $classes = [];
        $base = rtrim($this->app->path(), '/');
        try {
            $namespace = $this->app->getNamespace();
        } catch (\Throwable) {
            return [];
        }
        foreach (self::APP_DIRECTORIES as $directory) {
            $root = "$base/$directory";
            if (!is_dir($root)) {
                continue;
            }
            $files = new \RecursiveIteratorIterator(new \RecursiveDirectoryIterator($root, \FilesystemIterator::SKIP_DOTS));
            foreach ($files as $file) {
                if ($file->getExtension() !== 'php') {
                    continue;
                }
                $relative = substr($file->getPathname(), strlen($base) + 1, -4);
                $classes[] = $namespace . str_replace('/', '\\', $relative);
            }
        }
        sort($classes);
        return $classes;
    }

    /** Everything that holds a connection or a per-process handle is let go in the zygote. */
    private function letGo(): void
    {
        $app = $this->app;
        if ($app->resolved('db')) {
            foreach (array_keys($app['db']->getConnections()) as $name) {
                $app['db']->purge($name);
            }
        }
        if ($app->resolved('redis')) {
            $redis = $app['redis'];
            foreach (array_keys($redis->connections() ?? []) as $name) {
                $redis->purge($name);
            }
        }
        if ($app->resolved('cache')) {
            (fn () => $this->stores = [])->call($app['cache']);
            $app->forgetInstance('cache.store');
        }
        if ($app->resolved('queue')) {
            (fn () => $this->connections = [])->call($app['queue']);
        }
        if ($app->resolved('mail.manager')) {
            (fn () => $this->mailers = [])->call($app['mail.manager']);
            $app->forgetInstance('mailer');
        }
        if ($app->resolved('auth')) {
            $app['auth']->forgetGuards();
        }
        if ($app->resolved('log')) {
            foreach ($app['log']->getChannels() as $channel) {
                $monolog = method_exists($channel, 'getLogger') ? $channel->getLogger() : $channel;
                if (!$monolog instanceof \Monolog\Logger) {
                    continue;
                }
                // Each worker opens its own stream (file position, socket) at its first record.
                foreach ($monolog->getHandlers() as $handler) {
                    $handler->close();
                }
                $monolog->reset();
            }
        }
        if (method_exists(\Illuminate\Support\Str::class, 'flushCache')) {
            \Illuminate\Support\Str::flushCache();
        }
    }

    /** In each worker, right after the fork. */
    public function afterFork(): void
    {
        $app = $this->app;
        // The zygote let go of its connections before forking; one a provider opened anyway in
        // a place the framework does not know of cannot be reached here. Any the managers still
        // know are dropped without a goodbye on the shared socket.
        if ($app->resolved('db')) {
            $db = $app['db'];
            foreach ($db->getConnections() as $connection) {
                self::$inherited[] = $connection;
            }
            (fn () => $this->connections = [])->call($db);
        }
        if ($app->resolved('redis')) {
            $redis = $app['redis'];
            foreach ($redis->connections() ?? [] as $connection) {
                self::$inherited[] = $connection;
            }
            (fn () => $this->connections = [])->call($redis);
        }
    }
}
