<?php

namespace Drover\Console;

/**
 * Writes the contract into the master's state directory, where `drover run --config` reads it —
 * so that nothing planted there is followed or read (docs/security.md, "The state directory"):
 *
 * - the directory must be a real directory of this process's user (a link is refused: whoever
 *   can replace it would choose where the contract and the sockets go);
 * - what stands at the contract's name must be a regular file of this user, or nothing: a link,
 *   a FIFO or another user's file is refused by name, with the fix;
 * - the contract is written to a new file created exclusively (`fopen` mode `x`: never through a
 *   link), mode 0600, then renamed over the name.
 *
 * The master checks the same again when it reads it (src/state_dir). A state directory a root
 * master of drover 0.2 made (root's) is refused here with the fix; `drover launch`, which the
 * package's unit runs, moves it aside before PHP starts (src/state_dir/legacy.rs).
 */
final class ContractFile
{
    /**
     * Writes $json as $name in $stateDir (created, mode 0750, when missing); returns the file.
     *
     * @throws \RuntimeException naming what is wrong and the fix
     */
    public static function write(string $stateDir, string $name, string $json): string
    {
        $stateDir = rtrim($stateDir, '/');
        $euid = RootStart::euid();
        if (!file_exists($stateDir) && !is_link($stateDir) && !@mkdir($stateDir, 0750, true) && !is_dir($stateDir)) {
            throw new \RuntimeException("drover: cannot create the state directory $stateDir (check that its parent is writable by this user)");
        }
        clearstatcache(true, $stateDir);
        if (is_link($stateDir) || !is_dir($stateDir)) {
            throw new \RuntimeException("drover: the state directory $stateDir is " . self::kind($stateDir) . ', not a directory: drover follows no link to its state; remove it (drover makes the directory) or set DROVER_STATE_DIR to a directory of this user');
        }
        if (fileowner($stateDir) !== $euid) {
            $made = fileowner($stateDir) === 0 ? ' (a root master of an earlier drover made it: as root, remove it — `rm -r ' . $stateDir . '`, it holds no job — or start the service through `drover launch`, which moves it aside)' : '';
            throw new \RuntimeException("drover: the state directory $stateDir belongs to uid " . fileowner($stateDir) . ", not to this user (uid $euid)$made: only the master's user may own it; give it to this user (`chown -R $euid: $stateDir`) or set DROVER_STATE_DIR to a directory of this user");
        }
        $file = "$stateDir/$name";
        clearstatcache(true, $file);
        if (is_link($file) || (file_exists($file) && (!is_file($file) || fileowner($file) !== $euid))) {
            throw new \RuntimeException("drover: $file is " . self::kind($file) . ', where drover writes its contract: something other than drover put it there; remove it (`rm ' . $file . '`) and start again');
        }
        $tmp = "$stateDir/.$name." . bin2hex(random_bytes(8));
        $umask = umask(0077);
        $handle = @fopen($tmp, 'x');
        umask($umask);
        if ($handle === false) {
            throw new \RuntimeException("drover: cannot write $tmp (the state directory $stateDir must be writable by this user)");
        }
        $written = fwrite($handle, $json) === strlen($json);
        fclose($handle);
        if (!$written || !@chmod($tmp, 0600) || !@rename($tmp, $file)) {
            @unlink($tmp);
            throw new \RuntimeException("drover: cannot write $file");
        }
        return $file;
    }

    /** What stands at $path, in words. */
    private static function kind(string $path): string
    {
        if (is_link($path)) {
            return 'a symbolic link';
        }
        $type = @filetype($path);
        return match ($type) {
            'fifo' => 'a FIFO (named pipe)',
            'dir' => 'a directory',
            'socket' => 'a socket',
            'file' => 'a file of uid ' . fileowner($path),
            false => 'missing',
            default => "a $type",
        };
    }
}
