<?php

namespace Drover\Worker;

/**
 * The libc calls fork mode needs and PHP lacks, through FFI (enabled for the CLI by
 * default: `ffi.enable=preload`). The handle is made in the zygote, before it forks, so every
 * worker inherits it.
 *
 * - dieWithParent(): a forked worker dies with its master, as a worker the master started does:
 *   its parent-death signal is SIGKILL (`prctl(PR_SET_PDEATHSIG)`), set once the worker has been
 *   re-parented to the master. A worker that outlived its master would run on with a job whose
 *   lease nobody renews while another master runs it again.
 * - close(): the worker lets go of the zygote's fd 3 (PHP's `php://fd/3` is a dup; the original
 *   stays open), so its own connection to the master becomes its fd 3.
 * - pageOutUnsharedFilePages(): the zygote gives back the pages of its binary and libraries that
 *   only its own start-up touched (the compiler, extensions' initialisation) and no worker maps:
 *   `madvise(MADV_PAGEOUT)` frees clean file pages mapped by this process alone and leaves every
 *   page a worker also maps where it is.
 */
final class Libc
{
    private const PR_SET_PDEATHSIG = 1;

    private const MADV_PAGEOUT = 21;

    private function __construct(private readonly \FFI $libc)
    {
    }

    /** A handle, or why there can be none (the zygote then cannot serve: the master falls back to exec). */
    public static function prepare(): self|string
    {
        if (!extension_loaded('ffi')) {
            return 'the PHP FFI extension is not loaded (forked workers need it to die with their master: install or enable ext-ffi, or set spawn to exec)';
        }
        try {
            // No library: prctl is resolved in the PHP binary's own namespace (libc).
            return new self(\FFI::cdef('int prctl(int option, unsigned long arg2, unsigned long arg3, unsigned long arg4, unsigned long arg5); int close(int fd); int madvise(unsigned long addr, unsigned long length, int advice);'));
        } catch (\Throwable $e) {
            return 'FFI cannot be used here (' . $e->getMessage() . '; ffi.enable is ' . var_export(ini_get('ffi.enable'), true) . ': set it to preload or true for the CLI, or set spawn to exec)';
        }
    }

    /**
     * Waits until this process's parent is $masterPid (the zygote's middle process exits at
     * once), then asks for SIGKILL when that parent dies. Null on success, else what went wrong.
     */
    public function dieWithParent(int $masterPid, float $timeout = 2.0): ?string
    {
        $deadline = hrtime(true) + (int) ($timeout * 1e9);
        while (($parent = posix_getppid()) !== $masterPid) {
            if (hrtime(true) > $deadline) {
                return "this worker's parent is pid $parent, not the master (pid $masterPid): the master is gone or is not a subreaper";
            }
            usleep(200);
        }
        if ($this->libc->prctl(self::PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) !== 0) {
            return 'prctl(PR_SET_PDEATHSIG) failed';
        }
        // The master may have died between the check and the prctl: then the signal never comes.
        if (posix_getppid() !== $masterPid) {
            return "the master (pid $masterPid) is gone";
        }
        return null;
    }

    /** close(2) on a descriptor no PHP stream owns. */
    public function close(int $fd): void
    {
        $this->libc->close($fd);
    }

    /**
     * MADV_PAGEOUT over every read-only mapping of a file (the PHP binary, its libraries and
     * extensions): the kernel frees the clean pages only this process maps and skips shared ones.
     * Returns how many KiB were advised (not how many were freed), 0 where /proc says nothing.
     */
    public function pageOutUnsharedFilePages(): int
    {
        $maps = @file('/proc/self/maps', FILE_IGNORE_NEW_LINES);
        if ($maps === false) {
            return 0;
        }
        $advised = 0;
        foreach ($maps as $line) {
            // start-end perms offset dev inode path
            $f = preg_split('/\s+/', $line, 6);
            if (count($f) < 6 || $f[4] === '0' || !str_starts_with($f[5], '/') || str_contains($f[1], 'w')
                || str_starts_with($f[5], '/dev/') || str_ends_with($f[5], '(deleted)')) {
                continue;
            }
            [$start, $end] = array_map('hexdec', explode('-', $f[0]));
            if (!is_int($start) || !is_int($end) || $end <= $start) {
                continue;
            }
            if ($this->libc->madvise($start, $end - $start, self::MADV_PAGEOUT) === 0) {
                $advised += intdiv($end - $start, 1024);
            }
        }
        return $advised;
    }
}
