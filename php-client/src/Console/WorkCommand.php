<?php

namespace Drover\Console;

use Drover\Config\Pools;
use Drover\Jobs\DroverJob;
use Drover\Protocol\Channel;
use Drover\Protocol\ChannelClosed;
use Drover\Schedule\ScheduledRun;
use Drover\Worker\CodeWatch;
use Drover\Worker\Feeder;
use Drover\Worker\JobLines;
use Drover\Worker\LaravelFork;
use Drover\Worker\LaravelWorker;
use Drover\Worker\Zygote;
use Illuminate\Console\Command;
use Illuminate\Console\Scheduling\Schedule;
use Illuminate\Contracts\Debug\ExceptionHandler;
use Illuminate\Queue\Events\JobFailed;
use Illuminate\Queue\WorkerOptions;

/**
 * `php artisan drover:work --pool=NAME`: one worker, started by the drover master with its socket
 * on fd 3. Runs jobs with Laravel's own worker; failures go to Laravel's failer (failed_jobs).
 * Started with DROVER_ZYGOTE=1 (the pool's `spawn` is `fork`), it is the pool's zygote instead:
 * it forks the workers, each of which then runs exactly as above.
 */
class WorkCommand extends Command
{
    protected $signature = 'drover:work {--pool=default : The pool in config/drover.php whose options to use}';

    protected $description = 'Run jobs pushed by the drover master (started by `php artisan drover`, not by hand)';

    public function handle(): int
    {
        if (!function_exists('pcntl_alarm') || !function_exists('posix_kill')) {
            // Laravel's worker needs pcntl for its signals (queue:work too); the worker's check
            // that its master is alive needs posix.
            $this->error('drover:work needs the pcntl and posix PHP extensions (Debian: php-cli ships them; check `php -m`)');
            return 2;
        }
        $name = (string) $this->option('pool');
        $config = $this->laravel['config']['drover'] ?? [];
        $foreground = getenv('DROVER_POOL_OPTIONS');
        if (is_string($foreground) && $foreground !== '') {
            // A foreground master (`queue:work` / `queue:listen` on a drover connection) gives its
            // one pool's options from the command line; config/drover.php has no such pool.
            $options = json_decode($foreground, true);
            if (!is_array($options)) {
                $this->error('drover:work: DROVER_POOL_OPTIONS is not a JSON object of pool options: ' . json_last_error_msg());
                return 2;
            }
            $config['defaults'] = [];
            $config['environments'] = ['*' => [$name => $options]];
        }
        try {
            $pools = Pools::resolve($config, $this->laravel->environment());
        } catch (\Drover\Config\InvalidConfig $e) {
            $this->error('drover:work: ' . $e->getMessage());
            return 2;
        }
        if (!isset($pools[$name])) {
            $this->error("drover:work: no pool named $name in config/drover.php (pools: " . implode(', ', array_keys($pools)) . ')');
            return 2;
        }
        $pool = $pools[$name];
        if (getenv('DROVER_ZYGOTE') === '1') {
            return $this->serveForks($name, $pool);
        }
        try {
            $feeder = Feeder::fromEnvironment();
        } catch (\RuntimeException $e) {
            $this->error($e->getMessage());
            return 2;
        }
        return $this->work($name, $pool, $feeder);
    }

    /**
     * The zygote of the pool (the master started this with DROVER_ZYGOTE=1): the application is
     * booted (artisan did it); warm what workers share, let go of what they must not, then fork
     * a worker per request. Returns in each worker with its exit code, as a worker run by exec.
     *
     * @param array<string, mixed> $pool
     */
    protected function serveForks(string $name, array $pool): int
    {
        $fork = new LaravelFork($this->laravel);
        try {
            $zygote = Zygote::fromInheritedFd(
                fn (Channel $channel): int => $this->work($name, $pool, Feeder::fromChannel($channel)),
                fn () => $fork->afterFork(),
                3,
                fn (Channel $channel, array $run): int => $this->runOneOff($channel, $run),
            );
        } catch (\RuntimeException $e) {
            $this->error($e->getMessage());
            return 2;
        }
        if (is_string($zygote)) {
            return 1; // the master was told why and starts this pool's workers by exec
        }
        try {
            $fork->prepare();
        } catch (\Throwable $e) {
            $zygote->cannotServe('warming the application failed: ' . get_class($e) . ': ' . $e->getMessage());
            return 1;
        }
        return $zygote->serve();
    }

    /**
     * A one-off forked from this pool's zygote (zygote protocol 2): a due time of a scheduled
     * task (`{"kind":"schedule","task":KEY,"index":N}`), run as `drover:schedule-run` runs it,
     * without booting the application again. Its outcome goes to the master on $channel, the
     * line `drover:schedule-run` would print last; the exit code is that command's.
     *
     * @param array<string, string> $run
     */
    protected function runOneOff(Channel $channel, array $run): int
    {
        if (($run['kind'] ?? null) !== 'schedule' || !isset($run['task'], $run['index']) || !ctype_digit($run['index'])) {
            fwrite(STDERR, 'drover one-off: not a request this package runs: ' . json_encode($run) . " (a newer master than drover/laravel?)\n");
            return 2;
        }
        [$result, $exit] = $this->laravel->make(ScheduledRun::class)
            ->runTask($this->laravel->make(Schedule::class), $run['task'], (int) $run['index'], \Drover\Schedule\OneServer::due($run['due'] ?? null));
        try {
            $channel->write(ScheduledRun::line($result) . "\n");
        } catch (ChannelClosed) {
            return 1;
        }
        return $exit;
    }

    /**
     * Runs jobs from the master on $feeder until told to stop; the exit code.
     *
     * @param array<string, mixed> $pool
     */
    protected function work(string $name, array $pool, Feeder $feeder): int
    {
        $queueWorker = $this->laravel['queue.worker'];
        // Laravel's per-job scope reset (database query log, facades, …), as queue:work uses it.
        $resetScope = (fn () => $this->resetScope ?? null)->call($queueWorker);
        $worker = new LaravelWorker(
            $this->laravel['queue'],
            $this->laravel['events'],
            $this->laravel[ExceptionHandler::class],
            fn () => $this->laravel->isDownForMaintenance(),
            $resetScope,
        );
        $worker->setFeeder($feeder)->setPauseSleep((int) $pool['sleep'])->setName("drover:$name")->setCache($this->laravel['cache.store']);
        if (getenv('DROVER_RELOAD_ON_CHANGE') === '1') {
            $worker->setCodeWatch(CodeWatch::snapshot());
        }
        $this->listenForFailures();
        if (getenv('DROVER_FOREGROUND') === '1') {
            (new JobLines())->listen($this->laravel['events']);
        }

        $options = new WorkerOptions(
            "drover:$name",
            implode(',', $pool['backoff']),
            (int) $pool['memory'],
            (int) $pool['timeout'],
            0, // never poll: the worker blocks on the master's socket; `sleep` is the pause nap

            (int) $pool['tries'],
            (bool) $pool['force'],
            false,
            (int) $pool['max_jobs'],
            (int) $pool['max_time'],
            (int) $pool['rest'],
        );
        try {
            $feeder->hello((int) $pool['max_jobs']);
            return (int) $worker->daemon($pool['connection'], implode(',', $pool['queue']), $options);
        } catch (ChannelClosed $e) {
            fwrite(STDERR, $e->getMessage() . "; exiting\n");
            return 1;
        }
    }

    /** Failed jobs go to Laravel's failer, then the master is told; if logging fails, the job is retried. */
    protected function listenForFailures(): void
    {
        $this->laravel['events']->listen(JobFailed::class, function (JobFailed $event) {
            if (!$event->job instanceof DroverJob) {
                return;
            }
            try {
                $this->laravel['queue.failer']->log(
                    $event->connectionName,
                    $event->job->getQueue(),
                    $event->job->getRawBody(),
                    $event->exception,
                );
            } catch (\Throwable $e) {
                $this->laravel[ExceptionHandler::class]->report($e);
                // Laravel's failer could not record it: the master keeps it in drover.failed_jobs.
                $event->job->getFeeder()->fail('drover: the failer could not log this failure (' . $e->getMessage() . '); original error: ' . get_class($event->exception) . ': ' . $event->exception->getMessage());
                return;
            }
            $event->job->reportFailure($event->exception);
        });
    }
}
