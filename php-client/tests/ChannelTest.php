<?php

namespace Drover\Tests;

use Drover\Protocol\Channel;
use Drover\Protocol\ChannelClosed;
use PHPUnit\Framework\TestCase;

final class ChannelTest extends TestCase
{
    /** @return array{Channel, resource} */
    private function pair(): array
    {
        [$a, $b] = stream_socket_pair(STREAM_PF_UNIX, STREAM_SOCK_STREAM, STREAM_IPPROTO_IP);
        return [new Channel($a), $b];
    }

    public function testFramesAreOneLineOfJsonEach(): void
    {
        [$channel, $master] = $this->pair();
        $channel->send(['t' => 'fail', 'job' => 1, 'token' => 2, 'error' => "multi\nline / é"]);
        $line = fgets($master);
        $this->assertStringEndsWith("\n", $line);
        $this->assertSame(1, substr_count($line, "\n"));
        $this->assertSame(['t' => 'fail', 'job' => 1, 'token' => 2, 'error' => "multi\nline / é"], json_decode($line, true));
    }

    public function testReceiveWaitsOnlyAsLongAsAsked(): void
    {
        [$channel, $master] = $this->pair();
        $t = microtime(true);
        $this->assertNull($channel->receive(0.05));
        $this->assertGreaterThanOrEqual(0.04, microtime(true) - $t);
        fwrite($master, "{\"t\":\"job\",\"job\":3}\n{\"t\":\"stop\"}\n");
        $this->assertSame(['t' => 'job', 'job' => 3], $channel->receive(1.0));
        $this->assertSame(['t' => 'stop'], $channel->receive(0.0), 'a buffered frame is seen without waiting');
    }

    public function testAWaitASignalInterruptsGoesOnForTheTimeLeft(): void
    {
        [$channel, $master] = $this->pair();
        pcntl_async_signals(true);
        $signals = 0;
        pcntl_signal(SIGUSR1, function () use (&$signals) {
            $signals++;
        });
        $parent = posix_getpid();
        $child = pcntl_fork();
        if ($child === 0) {
            // Signals while the parent waits, then the frame.
            foreach ([50_000, 50_000, 50_000] as $nap) {
                usleep($nap);
                posix_kill($parent, SIGUSR1);
            }
            usleep(100_000);
            fwrite($master, "{\"t\":\"withdraw\",\"queue\":\"q\"}\n");
            posix_kill(posix_getpid(), SIGKILL); // no shutdown functions in the child
        }
        try {
            $frame = $channel->receive(5.0);
        } finally {
            pcntl_waitpid($child, $status);
            pcntl_signal(SIGUSR1, SIG_DFL);
        }
        $this->assertGreaterThanOrEqual(1, $signals, 'the wait was interrupted');
        $this->assertSame(['t' => 'withdraw', 'queue' => 'q'], $frame, 'and went on to the frame');
    }

    public function testAClosedMasterEndIsReported(): void
    {
        [$channel, $master] = $this->pair();
        fclose($master);
        $this->expectException(ChannelClosed::class);
        $channel->receive(1.0);
    }

    public function testAMissingFd3IsExplained(): void
    {
        $this->expectExceptionMessage('must be started by the drover master');
        Channel::fromInheritedFd(97);
    }

    public function testDelaysAreClampedToWhatTheMasterAccepts(): void
    {
        $this->assertSame(0, Channel::delayMs(-5));
        $this->assertSame(0, Channel::delayMs(NAN));
        $this->assertSame(1500, Channel::delayMs(1.5));
        $this->assertSame(Channel::MAX_DELAY_MS, Channel::delayMs(1e16));
    }

    public function testAPartialLastLineMeansTheMasterIsGone(): void
    {
        [$channel, $master] = $this->pair();
        fwrite($master, '{"t":"jo');
        fclose($master);
        $this->expectException(ChannelClosed::class);
        $channel->receive(1.0);
    }
}
