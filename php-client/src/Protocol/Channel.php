<?php

namespace Drover\Protocol;

/**
 * The worker's end of the socketpair to the master (fd 3): newline-delimited JSON frames,
 * protocol version 4 (docs/protocol.md).
 */
final class Channel
{
    public const VERSION = 4;

    /** Frames from the worker longer than this are refused by the master; errors are cut to fit. */
    public const MAX_ERROR_BYTES = 16384;

    /** @var resource */
    private $stream;

    /** @param resource $stream a connected stream socket */
    public function __construct($stream)
    {
        $this->stream = $stream;
    }

    /** The channel the master hands every worker as fd 3. */
    public static function fromInheritedFd(int $fd = 3): self
    {
        $stream = @fopen("php://fd/$fd", 'r+');
        if ($stream === false || @fstat($stream) === false) {
            throw new \RuntimeException("drover worker: fd $fd is not open; this worker must be started by the drover master (drover run -- ...)");
        }
        return new self($stream);
    }

    /** Closes this end (a forked worker lets go of its zygote's control channel). */
    public function close(): void
    {
        if (is_resource($this->stream)) {
            fclose($this->stream);
        }
    }

    /** The longest delay a release may ask for: ten years, in milliseconds. */
    public const MAX_DELAY_MS = 315360000000;

    /** Seconds to the protocol's delay_ms: never negative, never past MAX_DELAY_MS. */
    public static function delayMs(float $seconds): int
    {
        if (!is_finite($seconds) || $seconds <= 0) {
            return 0;
        }
        return (int) min(round($seconds * 1000), self::MAX_DELAY_MS);
    }

    /** @param array<string, mixed> $frame */
    public function send(array $frame): void
    {
        $line = json_encode($frame, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_INVALID_UTF8_SUBSTITUTE | JSON_THROW_ON_ERROR) . "\n";
        $this->write($line);
    }

    /** Writes raw bytes; only for tests of the master's handling of bad input. */
    public function write(string $bytes): void
    {
        $left = $bytes;
        while ($left !== '') {
            $n = @fwrite($this->stream, $left);
            if ($n === false || $n === 0) {
                throw new ChannelClosed('drover worker: cannot write to the master (socket closed)');
            }
            $left = substr($left, $n);
        }
    }

    /**
     * Whether a frame can be read within $timeout seconds. A wait a signal interrupts (EINTR:
     * a job's child exiting, a pcntl signal) is taken up again for the time left: read as "no
     * frame", it would let the worker start a job before it has read a `withdraw` already waiting.
     */
    private function readable(float $timeout): bool
    {
        $deadline = hrtime(true) + (int) ($timeout * 1e9);
        for ($tries = 0; ; $tries++) {
            $read = [$this->stream];
            $write = $except = null;
            $left = max(0, $deadline - hrtime(true));
            $ready = @stream_select($read, $write, $except, intdiv($left, 1_000_000_000), intdiv($left % 1_000_000_000, 1000));
            if ($ready !== false) {
                return $ready > 0;
            }
            if (feof($this->stream)) {
                throw new ChannelClosed('drover worker: the master closed the connection');
            }
            if ($tries >= 100) {
                throw new \RuntimeException('drover worker: cannot wait on the channel to the master (fd 3): ' . (error_get_last()['message'] ?? 'select failed'));
            }
        }
    }

    /**
     * The next frame, waiting up to $timeout seconds (null = no limit). Returns null when nothing
     * arrived in time; throws ChannelClosed when the master is gone.
     *
     * @return array<string, mixed>|null
     */
    public function receive(?float $timeout = null): ?array
    {
        if ($timeout !== null && !$this->readable($timeout)) {
            return null;
        }
        $line = fgets($this->stream);
        if ($line === false || !str_ends_with($line, "\n")) {
            if (feof($this->stream)) {
                // A partial last line means the master died mid-write.
                throw new ChannelClosed('drover worker: the master closed the connection');
            }
            if ($line === false) {
                return null;
            }
        }
        $frame = json_decode($line, true);
        if (!is_array($frame) || !isset($frame['t'])) {
            throw new \UnexpectedValueException('drover worker: malformed frame from the master: ' . substr($line, 0, 80));
        }
        return $frame;
    }
}
