<?php

namespace Drover\Worker;

use Drover\Protocol\Channel;

/**
 * The worker's side of the protocol, shared by the plain worker loop and the Laravel worker:
 * says hello, keeps the jobs the master pushed (its prefetch buffer), follows stop / pause /
 * resume, and reports started / done / release / fail for the job it runs.
 *
 * It also enforces the lease of every job it holds, whatever the master does (docs/leases.md):
 * each job frame carries a deadline (`lease_until_ms`, CLOCK_MONOTONIC milliseconds — hrtime()
 * reads the same clock as the master) that `lease` frames move on every renewal. A job whose
 * deadline is less than START_MIN_MS away is given back instead of started. While a job runs, a
 * SIGALRM armed for the last whole second before the deadline reads the frames that arrived (the
 * renewals); if the deadline did not move, the process kills itself, so a frozen or cut-off
 * master never leaves a job running past its lease.
 */
final class Feeder
{
    /**
     * The lease guard's resolution: pcntl_alarm() counts whole seconds, so the guard acts up to
     * this long before the deadline, never after it.
     */
    public const GUARD_TICK_MS = 1000;

    /**
     * A job is started only with at least this much of its lease left (the guard's resolution
     * plus room for the application's before-job work), else given back.
     */
    public const START_MIN_MS = 1500;

    /** @var list<array<string, mixed>> job frames received and not yet started */
    private array $prefetched = [];

    /** The deadline of the running job (CLOCK_MONOTONIC ms), while it runs. */
    private ?int $runningUntil = null;

    /** The SIGALRM handler is installed (once per process). */
    private bool $guardInstalled = false;

    private bool $paused = false;

    private bool $stopping = false;

    /** The job frame being run: the one that was started and has no outcome yet. */
    private ?array $current = null;

    public function __construct(
        private readonly Channel $channel,
        private readonly int $prefetch = 1,
        /** The master's PID: if our parent changes, the master died and we must not go on. */
        private readonly ?int $masterPid = null,
    ) {
        if ($prefetch < 1) {
            throw new \InvalidArgumentException("drover worker: prefetch must be at least 1, got $prefetch");
        }
    }

    /** From the environment the master gives its workers (fd 3, DROVER_PREFETCH, DROVER_MASTER_PID). */
    public static function fromEnvironment(): self
    {
        $prefetch = (int) (getenv('DROVER_PREFETCH') ?: 1);
        $master = getenv('DROVER_MASTER_PID');
        return new self(Channel::fromInheritedFd(3), $prefetch, $master !== false ? (int) $master : null);
    }

    public function hello(): void
    {
        $this->channel->send(['t' => 'hello', 'v' => Channel::VERSION, 'pid' => getmypid(), 'prefetch' => $this->prefetch]);
    }

    /**
     * The next job frame to run, waiting up to $wait seconds for one when none is buffered.
     * Null when nothing came, when paused, or when told to stop.
     *
     * @return array<string, mixed>|null
     */
    public function next(float $wait): ?array
    {
        $idle = $this->prefetched === [] || $this->paused;
        $frame = $this->channel->receive($idle ? $wait : 0.0);
        while ($frame !== null) {
            $this->onFrame($frame);
            $frame = $this->channel->receive(0.0);
        }
        if ($this->stopping || $this->paused) {
            $this->giveBackPrefetched();
            return null;
        }
        while ($this->prefetched !== []) {
            $job = array_shift($this->prefetched);
            $left = self::leaseLeftMs($job);
            if ($left === null || $left >= self::START_MIN_MS) {
                return $job;
            }
            // Its lease ends before the guard could watch it: never start it (the master takes
            // it back; by then another master may already have).
            fwrite(STDERR, "drover worker: not starting job {$job['job']}: its lease ends in {$left} ms and was not renewed; giving it back\n");
            $this->channel->send(['t' => 'return', 'job' => $job['job'], 'token' => $job['token']]);
        }
        return null;
    }

    /** Milliseconds left before the job's deadline (negative once past); null if it has none. */
    private static function leaseLeftMs(array $job): ?int
    {
        if (!isset($job['lease_until_ms']) || !is_int($job['lease_until_ms'])) {
            return null;
        }
        return $job['lease_until_ms'] - intdiv(hrtime(true), 1_000_000);
    }

    /** Takes in whatever frames arrived (stop, pause, resume, jobs) without waiting. */
    public function poll(): void
    {
        while (($frame = $this->channel->receive(0.0)) !== null) {
            $this->onFrame($frame);
        }
    }

    /**
     * @param array<string, mixed> $frame
     * @param bool $quiet in the lease guard's signal handler: record, send nothing (the job may
     *   be in the middle of a send); next() gives back what must go back
     */
    private function onFrame(array $frame, bool $quiet = false): void
    {
        switch ($frame['t']) {
            case 'job':
                $this->prefetched[] = $frame;
                if (($this->paused || $this->stopping) && !$quiet) {
                    $this->giveBackPrefetched();
                }
                break;
            case 'lease':
                $this->leaseRenewed((int) $frame['until_ms']);
                break;
            case 'stop':
                $this->stopping = true;
                if (!$quiet) {
                    $this->giveBackPrefetched();
                }
                break;
            case 'pause':
                $this->paused = true;
                if (!$quiet) {
                    $this->giveBackPrefetched();
                }
                break;
            case 'resume':
                $this->paused = false;
                break;
            default:
                fwrite(STDERR, "drover worker: ignoring unknown frame type {$frame['t']}\n");
        }
    }

    /**
     * Paused or stopping: the jobs received ahead of time go back to the master at once (uncharged),
     * so no other worker waits for them while this one finishes its job or sits paused.
     */
    private function giveBackPrefetched(): void
    {
        foreach ($this->prefetched as $job) {
            $this->channel->send(['t' => 'return', 'job' => $job['job'], 'token' => $job['token']]);
        }
        $this->prefetched = [];
    }

    /** Told to stop (by the master or a signal): finish the running job, start no other. */
    public function stopping(): bool
    {
        return $this->stopping;
    }

    /** Safe in a signal handler: only sets the flag; the prefetched jobs go back in next(). */
    public function stop(): void
    {
        $this->stopping = true;
    }

    public function masterAlive(): bool
    {
        return $this->masterPid === null || posix_getppid() === $this->masterPid;
    }

    /** Every job held is good until at least $untilMs (a renewal). */
    private function leaseRenewed(int $untilMs): void
    {
        foreach ($this->prefetched as $i => $job) {
            $this->prefetched[$i]['lease_until_ms'] = max((int) ($job['lease_until_ms'] ?? 0), $untilMs);
        }
        if ($this->runningUntil !== null) {
            $this->runningUntil = max($this->runningUntil, $untilMs);
        }
    }

    /** @param array<string, mixed> $job */
    public function started(array $job): void
    {
        $this->current = $job;
        $this->channel->send(['t' => 'started', 'job' => $job['job'], 'token' => $job['token']]);
        if (isset($job['lease_until_ms']) && is_int($job['lease_until_ms'])) {
            $this->runningUntil = $job['lease_until_ms'];
            $this->armGuard();
        }
    }

    /**
     * Arms SIGALRM for the last whole second before the running job's deadline (at once if that
     * is less than a second away).
     */
    private function armGuard(): void
    {
        if (!function_exists('pcntl_alarm')) {
            return; // without pcntl the master's own lease check is the only guard
        }
        if (!$this->guardInstalled) {
            pcntl_async_signals(true);
            pcntl_signal(SIGALRM, fn () => $this->onGuardAlarm());
            $this->guardInstalled = true;
        }
        $left = $this->runningUntil - intdiv(hrtime(true), 1_000_000);
        if ($left < self::GUARD_TICK_MS) {
            $this->leaseEnded($left);
        }
        pcntl_alarm(intdiv($left, self::GUARD_TICK_MS));
    }

    /** SIGALRM while a job runs: take in the renewals that arrived, then re-arm or end. */
    private function onGuardAlarm(): void
    {
        if ($this->runningUntil === null) {
            return;
        }
        try {
            while (($frame = $this->channel->receive(0.0)) !== null) {
                $this->onFrame($frame, quiet: true);
            }
        } catch (\Throwable) {
            // The master is gone: the deadline can no longer move.
        }
        $this->armGuard();
    }

    /** The running job's lease is about to end unrenewed: end the process before it does. */
    private function leaseEnded(int $leftMs): never
    {
        $job = $this->current['job'] ?? '?';
        fwrite(STDERR, "drover worker: the lease of job $job ends in $leftMs ms and the master has not renewed it (frozen, stopped or cut off from the database); exiting now so the job never runs in two places\n");
        posix_kill(getmypid(), SIGKILL);
        exit(137); // not reached
    }

    private function disarmGuard(): void
    {
        $this->runningUntil = null;
        if (function_exists('pcntl_alarm')) {
            pcntl_alarm(0);
        }
    }

    /** The job being run, if its outcome is not reported yet. */
    public function current(): ?array
    {
        return $this->current;
    }

    public function done(): void
    {
        $this->report(['t' => 'done']);
    }

    public function release(float $delaySeconds): void
    {
        $this->report(['t' => 'release', 'delay_ms' => Channel::delayMs($delaySeconds)]);
    }

    /** @param bool $logged the application already recorded the failure (Laravel's failed_jobs) */
    public function fail(string $error, bool $logged = false): void
    {
        $frame = ['t' => 'fail', 'error' => substr($error, 0, Channel::MAX_ERROR_BYTES)];
        if ($logged) {
            $frame['logged'] = true;
        }
        $this->report($frame);
    }

    /** @param array<string, mixed> $frame */
    private function report(array $frame): void
    {
        if ($this->current === null) {
            return; // already reported: a job has one outcome
        }
        $this->disarmGuard();
        $job = $this->current;
        $this->current = null;
        $this->channel->send($frame + ['job' => $job['job'], 'token' => $job['token']]);
    }
}
