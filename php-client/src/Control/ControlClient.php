<?php

namespace Drover\Control;

/** Talks to a running master over its control socket (`<state_dir>/control.sock`). */
final class ControlClient
{
    /** The master's last answer as it sent it (JSON), for `drover:status --json`. */
    private ?string $raw = null;

    public function __construct(private readonly string $stateDir)
    {
    }

    /**
     * The last answer as JSON, pretty-printed, with the master's objects kept objects: decoded
     * into PHP arrays, an empty map (no paused queue) would come out as `[]`, not the `{}` that
     * docs/status.schema.json promises.
     */
    public function lastAnswerJson(): string
    {
        return (string) json_encode(json_decode((string) $this->raw), JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES);
    }

    /**
     * @param 'status'|'pause'|'continue'|'terminate'|'restart' $command
     * @param string|null $pool for pause and continue: only this pool (Horizon's pause-supervisor)
     * @return array<string, mixed> the master's answer
     * @throws NotRunning when no master answers
     * @throws PermissionDenied when this user may not use the socket
     */
    public function send(string $command, ?string $pool = null): array
    {
        $path = rtrim($this->stateDir, '/') . '/control.sock';
        $socket = @stream_socket_client("unix://$path", $errno, $error, 5);
        if ($socket === false) {
            if ($errno === 13 || stripos($error, 'permission denied') !== false) {
                throw new PermissionDenied(self::denied($path));
            }
            throw new NotRunning("no drover master is running with state directory {$this->stateDir} ($error)");
        }
        stream_set_timeout($socket, 10);
        $request = ['command' => $command];
        if ($pool !== null) {
            $request['pool'] = $pool;
        }
        fwrite($socket, json_encode($request) . "\n");
        $line = fgets($socket);
        fclose($socket);
        $this->raw = is_string($line) ? $line : null;
        $answer = is_string($line) ? json_decode($line, true) : null;
        if (!is_array($answer)) {
            throw new NotRunning("the drover master at {$this->stateDir} gave no answer");
        }
        if (isset($answer['error'])) {
            throw new \RuntimeException('drover master: ' . $answer['error']);
        }
        return $answer;
    }

    /** Who may use the socket, for the message. */
    private static function denied(string $path): string
    {
        $uid = @fileowner($path);
        $gid = @filegroup($path);
        if ($uid === false || $gid === false) {
            return "permission denied on the drover control socket $path: its state directory cannot be entered by this user; run this as the service's user or root";
        }
        $user = (posix_getpwuid($uid) ?: ['name' => (string) $uid])['name'];
        $group = (posix_getgrgid($gid) ?: ['name' => (string) $gid])['name'];
        $mode = sprintf('%o', fileperms($path) & 0777);
        return "permission denied on the drover control socket $path: it belongs to $user:$group with mode $mode: run this as $user, as root, or as a member of group $group (the workers' user)";
    }
}
