<?php

namespace Drover\Worker;

use Drover\Protocol\Channel;

/**
 * The worker's side of the protocol, shared by the plain worker loop and the Laravel worker:
 * says hello, keeps the jobs the master pushed (its prefetch buffer), follows stop / pause /
 * resume / withdraw, and reports started / done / release / fail for the job it runs.
 *
 * Every frame waiting on the channel is read before a job is started (next()), so a `withdraw`
 * (a queue paused by name) or a `pause` the master wrote before is always obeyed: the master
 * confirms a queue's pause once its `withdraw` is written, and `queue:pause` returns then.
 *
 * It never starts a job past its lease (docs/leases.md): each job frame carries a deadline
 * (`lease_until_ms`, CLOCK_MONOTONIC milliseconds — hrtime() reads the same clock as the master)
 * that `lease` frames move on every renewal, and a job whose deadline is less than START_MIN_MS
 * away is given back instead of started. A job that is running at its deadline is stopped from
 * outside, by the master's lease guard process: nothing here (no signal, no timer) interrupts the
 * job's own code.
 */
final class Feeder
{
    /**
     * A job is started only with at least this much of its lease left, else given back: one
     * started closer to its deadline would only be stopped by the lease guard.
     */
    public const START_MIN_MS = 1000;

    /** @var list<array<string, mixed>> job frames received and not yet started */
    private array $prefetched = [];


    private bool $paused = false;

    private bool $stopping = false;

    /** The job frame being run: the one that was started and has no outcome yet. */
    private ?array $current = null;

    /**
     * Queues withdrawn (paused by name) since next() last ran: a job it returned of one of them
     * is given back rather than started (start()).
     *
     * @var array<string, true>
     */
    private array $withdrawnSince = [];

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
        return self::fromChannel(Channel::fromInheritedFd(3));
    }

    /** On `$channel` (a forked worker's connection), with DROVER_PREFETCH and DROVER_MASTER_PID. */
    public static function fromChannel(Channel $channel): self
    {
        $prefetch = (int) (getenv('DROVER_PREFETCH') ?: 1);
        $master = getenv('DROVER_MASTER_PID');
        return new self($channel, $prefetch, $master !== false ? (int) $master : null);
    }

    /**
     * The protocol version to speak to a master that says it speaks $masterSays at most
     * (DROVER_PROTOCOL): this package's, or the master's when it is older. A master that says
     * nothing is of drover 0.1 and speaks 1 (a rolling upgrade with the package upgraded first:
     * docs/upgrading.md, "Workers"); it never sends what a newer version added.
     */
    public static function protocolFor(string|false $masterSays): int
    {
        if ($masterSays === false || !ctype_digit($masterSays)) {
            return 1;
        }
        return max(1, min(Channel::VERSION, (int) $masterSays));
    }

    /**
     * Whether the master reloads on Laravel's `queue:restart` when told (`queue_restart`,
     * protocol 3): a new zygote from the release the application's path points to now, the
     * workers replaced one by one. A master of an older release does not: there the worker exits
     * by itself, as under queue:work.
     */
    public function reloadsOnQueueRestart(): bool
    {
        return self::protocolFor(getenv('DROVER_PROTOCOL')) >= 3;
    }

    /** The restart timestamp this worker told the master of last (each is told once). */
    private mixed $queueRestartTold = null;

    /**
     * Tells the master that Laravel's `queue:restart` of timestamp $at was asked for (0: its
     * cache key is gone), once per timestamp. The master's reload then stops this worker, after
     * its running job, when its replacement is ready.
     */
    public function queueRestart(int $at): void
    {
        if ($this->queueRestartTold === $at) {
            return;
        }
        $this->queueRestartTold = $at;
        $this->channel->send(['t' => 'queue_restart', 'at' => $at]);
    }

    /**
     * The first frame. $maxJobs: how many jobs this worker runs before it exits (Laravel's
     * max_jobs, 0 for no limit), so the master prefetches none to it that it would not run.
     */
    public function hello(int $maxJobs = 0): void
    {
        $frame = ['t' => 'hello', 'v' => self::protocolFor(getenv('DROVER_PROTOCOL')), 'pid' => getmypid(), 'prefetch' => $this->prefetch];
        if ($maxJobs > 0) {
            $frame['max_jobs'] = $maxJobs;
        }
        $this->channel->send($frame);
    }

    /**
     * The next job frame to run, waiting up to $wait seconds for one when none is buffered.
     * Null when nothing came, when paused, or when told to stop.
     *
     * @return array<string, mixed>|null
     */
    public function next(float $wait): ?array
    {
        $this->withdrawnSince = [];
        // Told to stop, it waits for nothing more (start() may have given back a job for it).
        $idle = ($this->prefetched === [] || $this->paused) && !$this->stopping;
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

    /** @param array<string, mixed> $frame */
    private function onFrame(array $frame): void
    {
        switch ($frame['t']) {
            case 'job':
                // A job of a queue withdrawn earlier: the master resumed it since.
                unset($this->withdrawnSince[(string) ($frame['queue'] ?? '')]);
                $this->prefetched[] = $frame;
                if ($this->paused || $this->stopping) {
                    $this->giveBackPrefetched();
                }
                break;
            case 'lease':
                $this->leaseRenewed((int) $frame['until_ms']);
                break;
            case 'stop':
                $this->stopping = true;
                $this->giveBackPrefetched();
                break;
            case 'pause':
                $this->paused = true;
                $this->giveBackPrefetched();
                break;
            case 'resume':
                $this->paused = false;
                break;
            case 'withdraw':
                $this->giveBackQueue((string) ($frame['queue'] ?? ''));
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

    /**
     * The queue was paused by name: its prefetched jobs go back to the master at once
     * (uncharged), the others stay. The master sends no more of that queue's jobs while it is
     * paused.
     */
    private function giveBackQueue(string $queue): void
    {
        $this->withdrawnSince[$queue] = true;
        $kept = [];
        foreach ($this->prefetched as $job) {
            if (($job['queue'] ?? null) === $queue) {
                $this->channel->send(['t' => 'return', 'job' => $job['job'], 'token' => $job['token']]);
            } else {
                $kept[] = $job;
            }
        }
        $this->prefetched = $kept;
    }

    /**
     * $job (from next(), not started) and every prefetched job go back to the master uncharged,
     * and this worker stops: it will not run them (its code is out of date, Worker\CodeWatch).
     *
     * @param array<string, mixed> $job
     */
    public function giveBackAndStop(array $job): void
    {
        $this->channel->send(['t' => 'return', 'job' => $job['job'], 'token' => $job['token']]);
        $this->stopping = true;
        $this->giveBackPrefetched();
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
    }

    /**
     * Starts $job (from next()): reads the frames that arrived since next() returned it, then says
     * `started` — unless one of them says not to (its queue was withdrawn, or this worker was told
     * to pause or stop): then $job goes back to the master unstarted and false is returned. The
     * last look at the channel before a job starts is here, right before `started`.
     *
     * @param array<string, mixed> $job
     */
    public function start(array $job): bool
    {
        $this->poll();
        if ($this->stopping || $this->paused || isset($this->withdrawnSince[(string) ($job['queue'] ?? '')])) {
            $this->channel->send(['t' => 'return', 'job' => $job['job'], 'token' => $job['token']]);
            return false;
        }
        $this->current = $job;
        $this->channel->send(['t' => 'started', 'job' => $job['job'], 'token' => $job['token']]);
        return true;
    }

    /** The job being run, if its outcome is not reported yet. */
    public function current(): ?array
    {
        return $this->current;
    }

    /**
     * The job completed. $within: its completion was written in the job's own transaction
     * (`drover.complete_within`, which deleted its row) and that transaction committed; said as
     * `"within": true` to a master of protocol 4 or more, a plain `done` to an older one.
     */
    public function done(bool $within = false): void
    {
        $frame = ['t' => 'done'];
        if ($within && self::protocolFor(getenv('DROVER_PROTOCOL')) >= 4) {
            $frame['within'] = true;
        }
        $this->report($frame);
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

    /**
     * The running job's outcome is held from now until sendHeldOutcome(): it is decided inside
     * the job's transaction (a CompletesInTransaction job's release or failure) and must not
     * reach the master before that transaction has ended.
     */
    public function holdOutcome(): void
    {
        $this->holding = true;
    }

    /** Stops holding the outcome, and sends the one held, if any. */
    public function sendHeldOutcome(): void
    {
        $this->holding = false;
        $held = $this->held;
        $this->held = null;
        if ($held !== null) {
            $this->report($held);
        }
    }

    /** Outcomes are held (holdOutcome()). */
    private bool $holding = false;

    /** @var array<string, mixed>|null the outcome held, the first reported while holding */
    private ?array $held = null;

    /** @param array<string, mixed> $frame */
    private function report(array $frame): void
    {
        if ($this->holding) {
            $this->held ??= $frame;
            return;
        }
        if ($this->current === null) {
            return; // already reported: a job has one outcome
        }
        $job = $this->current;
        $this->current = null;
        $this->channel->send($frame + ['job' => $job['job'], 'token' => $job['token']]);
    }
}
