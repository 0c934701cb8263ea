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
 * The master checks the same again when it reads it (src/state_dir). One state directory is
 * moved aside here: one a root master of drover 0.2 made (owned by root), when no master holds
 * its lock and it keeps no embedded database — so an upgrade to a master that runs as the
 * application's user needs no step by hand.
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
        if (!is_link($stateDir) && is_dir($stateDir) && fileowner($stateDir) === 0 && $euid !== 0) {
            self::moveAsideRootMade($stateDir);
        }
        if (!file_exists($stateDir) && !is_link($stateDir) && !@mkdir($stateDir, 0750, true) && !is_dir($stateDir)) {
            throw new \RuntimeException("drover: cannot create the state directory $stateDir (check that its parent is writable by this user)");
        }
        clearstatcache(true, $stateDir);
        if (is_link($stateDir) || !is_dir($stateDir)) {
            throw new \RuntimeException("drover: the state directory $stateDir is " . self::kind($stateDir) . ', not a directory: drover follows no link to its state; remove it (drover makes the directory) or set DROVER_STATE_DIR to a directory of this user');
        }
        if (fileowner($stateDir) !== $euid) {
            throw new \RuntimeException("drover: the state directory $stateDir belongs to uid " . fileowner($stateDir) . ", not to this user (uid $euid): only the master's user may own it; give it to this user (`chown -R $euid: $stateDir`) or set DROVER_STATE_DIR to a directory of this user");
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

    /**
     * A state directory a root master of drover 0.2 made (owned by root, which this user cannot
     * write): renamed to `<dir>.root-owned-<time>` beside it (its parent, storage/, is this
     * user's), when no master holds its lock and it keeps no embedded database, and said on stderr.
     *
     * @throws \RuntimeException when it cannot be moved, with the fix
     */
    private static function moveAsideRootMade(string $stateDir): void
    {
        $fix = "as root, stop that master if one runs and remove the directory (`rm -r $stateDir`), or give it to this user (`chown -R " . RootStart::euid() . ": $stateDir`)";
        if (is_dir("$stateDir/postgres")) {
            throw new \RuntimeException("drover: the state directory $stateDir belongs to root and keeps an embedded PostgreSQL (made by a root master of an earlier drover); drover now runs as the application's user and leaves it be: $fix");
        }
        $lock = file_exists("$stateDir/master.lock") ? @fopen("$stateDir/master.lock", 'r') : null;
        if ($lock === false) {
            throw new \RuntimeException("drover: the state directory $stateDir belongs to root (a root master of an earlier drover made it), and whether a master still holds it cannot be read: $fix");
        }
        if ($lock !== null) {
            $free = flock($lock, LOCK_EX | LOCK_NB);
            if ($free) {
                flock($lock, LOCK_UN);
            }
            fclose($lock);
            if (!$free) {
                throw new \RuntimeException("drover: another drover master is already running with state directory $stateDir (a root master of an earlier drover); stop it first (`systemctl stop` its unit)");
            }
        }
        $aside = $stateDir . '.root-owned-' . date('YmdHis');
        if (!@rename($stateDir, $aside)) {
            throw new \RuntimeException("drover: the state directory $stateDir belongs to root (a root master of an earlier drover made it), and it could not be moved aside: $fix");
        }
        fwrite(STDERR, "drover: the state directory $stateDir belonged to root (a root master of an earlier drover made it; this master runs as the application's user): moved aside to $aside — remove it as root when convenient\n");
    }
}
