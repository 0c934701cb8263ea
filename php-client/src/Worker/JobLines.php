<?php

namespace Drover\Worker;

use Illuminate\Contracts\Events\Dispatcher;
use Illuminate\Queue\Events\JobFailed;
use Illuminate\Queue\Events\JobProcessed;
use Illuminate\Queue\Events\JobProcessing;
use Illuminate\Queue\Events\JobReleasedAfterException;

/**
 * A line per job on the terminal, as `queue:work` prints them, for the worker of a foreground
 * master (`queue:work` / `queue:listen` on a drover connection): RUNNING, then DONE, FAIL or
 * RELEASED with the run time. A service's workers print nothing (the master logs).
 */
final class JobLines
{
    /** @var array<string, float> job id => when it started (hrtime, seconds) */
    private array $started = [];

    /** @param resource $out */
    public function __construct(private $out = STDOUT)
    {
    }

    public function listen(Dispatcher $events): void
    {
        $events->listen(JobProcessing::class, function (JobProcessing $e) {
            $this->started[(string) $e->job->getJobId()] = hrtime(true) / 1e9;
            $this->line($e->job->resolveName(), 'RUNNING');
        });
        $events->listen(JobProcessed::class, fn (JobProcessed $e) => $this->finished($e->job, $e->job->isReleased() ? 'RELEASED' : 'DONE'));
        $events->listen(JobReleasedAfterException::class, fn (JobReleasedAfterException $e) => $this->finished($e->job, 'RELEASED'));
        $events->listen(JobFailed::class, fn (JobFailed $e) => $this->finished($e->job, 'FAIL'));
    }

    private function finished(object $job, string $outcome): void
    {
        $started = $this->started[(string) $job->getJobId()] ?? null;
        if ($started === null) {
            return; // already reported (a failure after a release, say)
        }
        unset($this->started[(string) $job->getJobId()]);
        $this->line($job->resolveName(), sprintf('%.2fms %s', (hrtime(true) / 1e9 - $started) * 1000, $outcome));
    }

    private function line(string $class, string $status): void
    {
        $head = date('Y-m-d H:i:s') . ' ' . $class . ' ';
        $dots = max(3, 100 - strlen($head) - strlen($status) - 1);
        fwrite($this->out, '  ' . $head . str_repeat('.', $dots) . ' ' . $status . "\n");
    }
}
