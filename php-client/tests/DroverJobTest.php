<?php

namespace Drover\Tests;

use Drover\Jobs\DroverJob;
use Drover\Protocol\Channel;
use Drover\Worker\Feeder;
use Illuminate\Container\Container;
use PHPUnit\Framework\TestCase;

/** A DroverJob reports its outcome to the master exactly once. */
final class DroverJobTest extends TestCase
{
    /** @var resource */
    private $master;

    private Feeder $feeder;

    protected function setUp(): void
    {
        [$master, $worker] = stream_socket_pair(STREAM_PF_UNIX, STREAM_SOCK_STREAM, STREAM_IPPROTO_IP);
        $this->master = $master;
        $this->feeder = new Feeder(new Channel($worker), 2);
    }

    private function job(int $id = 7, ?string $fail = null): DroverJob
    {
        $frame = ['t' => 'job', 'job' => $id, 'token' => 70, 'queue' => 'mail', 'attempts' => 2, 'max_attempts' => null, 'payload' => '{"uuid":"u-1","job":"X@y","maxTries":3,"data":{}}'];
        if ($fail !== null) {
            $frame['fail'] = $fail;
        }
        fwrite($this->master, json_encode($frame) . "\n");
        $received = $this->feeder->next(1.0);
        $this->assertTrue($this->feeder->start($received));
        $this->assertSame(['t' => 'started', 'job' => $id, 'token' => 70], json_decode(fgets($this->master), true));
        return new DroverJob(new Container(), $this->feeder, $received, 'drover');
    }

    /** @return list<array<string, mixed>> */
    private function sent(): array
    {
        $frames = [];
        $read = [$this->master];
        $w = $e = null;
        while (stream_select($read, $w, $e, 0, 100000) > 0) {
            $line = fgets($this->master);
            if ($line === false) {
                break;
            }
            $frames[] = json_decode($line, true);
            $read = [$this->master];
        }
        return $frames;
    }

    public function testItExposesTheFrameTheLaravelWay(): void
    {
        $job = $this->job();
        $this->assertSame('7', $job->getJobId());
        $this->assertSame(2, $job->attempts());
        $this->assertSame('mail', $job->getQueue());
        $this->assertSame('u-1', $job->uuid());
        $this->assertSame(3, $job->maxTries());
        $this->assertSame('drover', $job->getConnectionName());
        $this->assertNull($job->failureRequested());
        $this->assertSame('timeout', $this->job(8, 'timeout')->failureRequested());
    }

    public function testDeleteReportsDoneOnce(): void
    {
        $job = $this->job();
        $job->delete();
        $job->delete();
        $this->assertSame([['t' => 'done', 'job' => 7, 'token' => 70]], $this->sent());
        $this->assertTrue($job->isDeleted());
    }

    public function testReleaseReportsItsDelay(): void
    {
        $job = $this->job();
        $job->release(5);
        $this->assertSame([['t' => 'release', 'delay_ms' => 5000, 'job' => 7, 'token' => 70]], $this->sent());
        $this->assertTrue($job->isReleased());
    }

    public function testAFailedJobIsReportedAfterTheFailerNotAsDone(): void
    {
        $job = $this->job();
        $job->markAsFailed();
        $job->delete();
        $this->assertSame([], $this->sent(), 'no done for a failing job');
        $job->reportFailure(new \LogicException('boom'));
        $sent = $this->sent();
        $this->assertSame('fail', $sent[0]['t']);
        $this->assertSame('LogicException: boom', $sent[0]['error']);
    }
}
