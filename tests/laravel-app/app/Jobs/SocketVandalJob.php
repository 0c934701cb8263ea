<?php

namespace App\Jobs;

use App\Support\Journal;

/**
 * A job that writes to its worker's socket to the master (fd 3) behind the worker's back, on its
 * first attempt only (tests/hostile_input.rs): `garbage` (bytes that are no frame), `oversized`
 * (2 MiB with no newline, over the 1 MiB frame limit) or `forged` (a well-formed `done` for a job
 * this worker does not hold). The master must replace the worker and run the job again; the
 * second attempt journals `end`.
 */
class SocketVandalJob extends MatrixJob
{
    public $tries = 3;

    public function __construct(string $label, public string $mode)
    {
        parent::__construct($label);
    }

    protected function run(int $attempt): void
    {
        if ($attempt === 1) {
            $socket = fopen('php://fd/3', 'w');
            fwrite($socket, match ($this->mode) {
                'garbage' => "\x00\xff\x1b[2Jthis is not a frame\n",
                'oversized' => str_repeat('x', 2 * 1024 * 1024),
                'forged' => json_encode(['t' => 'done', 'job' => 987654321, 'token' => 1]) . "\n",
            });
            fflush($socket);
            sleep(30); // the master replaces this worker long before
        }
        Journal::record($this->label, 'end', $attempt, $this->job?->getConnectionName());
    }
}
