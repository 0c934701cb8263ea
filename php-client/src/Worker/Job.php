<?php

namespace Drover\Worker;

/** A leased job as the master hands it to a worker. */
final class Job
{
    public function __construct(
        public readonly int $id,
        /** The lease's fencing token; every report about the job carries it. */
        public readonly int $token,
        public readonly string $queue,
        /** Attempts so far, this one included. */
        public readonly int $attempts,
        /** null = no limit. */
        public readonly ?int $maxAttempts,
        public readonly string $payload,
    ) {
    }

    /** @param array<string, mixed> $frame a `job` frame */
    public static function fromFrame(array $frame): self
    {
        return new self(
            (int) $frame['job'],
            (int) $frame['token'],
            (string) $frame['queue'],
            (int) $frame['attempts'],
            isset($frame['max_attempts']) ? (int) $frame['max_attempts'] : null,
            (string) $frame['payload'],
        );
    }

    public function hasAttemptsLeft(): bool
    {
        return $this->maxAttempts === null || $this->attempts < $this->maxAttempts;
    }
}
