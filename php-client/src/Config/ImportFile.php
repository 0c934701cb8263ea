<?php

namespace Drover\Config;

/**
 * The file drover:import-horizon and drover:import-supervisor write the imported configuration
 * to before checking it with `require`: the system's temporary directory for --dry-run, else
 * config/, to be renamed over config/drover.php. Created by the import alone: a random name
 * (nobody can plant it beforehand), opened exclusively (fopen's 'x', O_CREAT|O_EXCL: it fails on
 * any existing path, a symlink included, so nothing planted is followed, overwritten or run) and
 * private (mode 0600 from the start, so nobody reads or replaces it meanwhile). The caller
 * deletes it in a `finally`.
 */
final class ImportFile
{
    /** Every import file's name starts so (a glob finds any left behind). */
    public const PREFIX = '.drover.php.import-';

    /**
     * A new private file in $dir holding $contents; its path.
     *
     * @throws \RuntimeException naming $dir and the system's reason
     */
    public static function create(string $dir, string $contents): string
    {
        $reason = 'unknown error';
        // A random name that exists already is another's (or a plant): take another name.
        for ($attempt = 0; $attempt < 5; $attempt++) {
            $path = rtrim($dir, '/') . '/' . self::PREFIX . bin2hex(random_bytes(16));
            $umask = umask(0077);
            try {
                $handle = @fopen($path, 'x');
            } finally {
                umask($umask);
            }
            if ($handle === false) {
                $reason = error_get_last()['message'] ?? $reason;
                if (file_exists($path) || is_link($path)) {
                    continue;
                }
                break;
            }
            try {
                $written = fwrite($handle, $contents) === strlen($contents) && fflush($handle);
            } finally {
                fclose($handle);
            }
            if (!$written) {
                @unlink($path);
                throw new \RuntimeException("cannot write $path (is the disk full?)");
            }
            return $path;
        }
        throw new \RuntimeException("cannot create a file in $dir: $reason");
    }

    /**
     * Renames the import file $path over $target, with the mode a new file of this process gets
     * (0666 less the umask), as a file written there directly would have: the application's
     * other users (PHP-FPM's) read config/ too.
     */
    public static function moveTo(string $path, string $target): bool
    {
        return @chmod($path, 0666 & ~umask()) && @rename($path, $target);
    }
}
