<?php

namespace Drover\Worker;

/**
 * The two libc calls a forked worker needs and PHP lacks, through FFI (enabled for the CLI by
 * default: `ffi.enable=preload`). The handle is made in the zygote, before it forks, so every
 * worker inherits it.
 *
 * - dieWithParent(): a forked worker dies with its master, as a worker the master started does:
 *   its parent-death signal is SIGKILL (`prctl(PR_SET_PDEATHSIG)`), set once the worker has been
 *   re-parented to the master. A worker that outlived its master would run on with a job whose
 *   lease nobody renews while another master runs it again.
 * - close(): the worker lets go of the zygote's fd 3 (PHP's `php://fd/3` is a dup; the original
 *   stays open), so its own connection to the master becomes its fd 3.
 */
final class Libc
{
    private const PR_SET_PDEATHSIG = 1;

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
            return new self(\FFI::cdef('int prctl(int option, unsigned long arg2, unsigned long arg3, unsigned long arg4, unsigned long arg5); int close(int fd);'));
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
}
