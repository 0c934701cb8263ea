<?php

namespace Drover\Control;

/** Talks to a running master over its control socket (`<state_dir>/control.sock`). */
final class ControlClient
{
    public function __construct(private readonly string $stateDir)
    {
    }

    /**
     * @param 'status'|'pause'|'continue'|'terminate' $command
     * @return array<string, mixed> the master's answer
     * @throws NotRunning when no master answers
     */
    public function send(string $command): array
    {
        $path = rtrim($this->stateDir, '/') . '/control.sock';
        $socket = @stream_socket_client("unix://$path", $errno, $error, 5);
        if ($socket === false) {
            throw new NotRunning("no drover master is running with state directory {$this->stateDir} ($error)");
        }
        stream_set_timeout($socket, 10);
        fwrite($socket, json_encode(['command' => $command]) . "\n");
        $line = fgets($socket);
        fclose($socket);
        $answer = is_string($line) ? json_decode($line, true) : null;
        if (!is_array($answer)) {
            throw new NotRunning("the drover master at {$this->stateDir} gave no answer");
        }
        if (isset($answer['error'])) {
            throw new \RuntimeException('drover master: ' . $answer['error']);
        }
        return $answer;
    }
}
