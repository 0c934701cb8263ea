<?php

namespace Drover\Config;

/**
 * The application's path as the service names it — a deploy tool's `current` symlink — instead of
 * the release directory it points to.
 *
 * PHP resolves symlinks in __DIR__, so Laravel's base_path() is the release that was current when
 * the process started (`/var/www/app/releases/41`). A master that kept that path would start its
 * new workers, and run its reload command, in the old release after `ln -sfn releases/42 current`
 * (and fail once the old release is deleted). Everything the master keeps — the workers' command
 * and working directory, the reload command, the state directory — is expressed through the path
 * as given, so the kernel resolves the symlink anew at every spawn.
 */
final class AppPath
{
    /**
     * The path as given: the configured one (drover.app_path, DROVER_APP_PATH); else the
     * directory of the artisan script PHP was started with (`php /var/www/app/current/artisan`,
     * or `php artisan` with the shell's $PWD); else $PWD when it is the application; else the base
     * path. A candidate counts only when it resolves to the base path itself.
     *
     * @param string|null $configured drover.app_path
     * @param string|null $script $_SERVER['SCRIPT_FILENAME'] (as typed, possibly relative)
     * @param string|null $pwd getenv('PWD') (set by shells, not by the kernel: it keeps symlinks)
     */
    public static function detect(string $basePath, ?string $configured, ?string $script, ?string $pwd): string
    {
        $real = realpath($basePath) ?: $basePath;
        if ($configured !== null && $configured !== '') {
            if ((realpath($configured) ?: null) !== $real) {
                throw new InvalidConfig(["drover.app_path (DROVER_APP_PATH) is $configured, which is not this application ($real); set it to the path that points to this release, e.g. the deploy tool's `current` symlink"]);
            }
            return self::normalize($configured);
        }
        $candidates = [];
        if ($script !== null && $script !== '') {
            $dir = dirname($script);
            if ($dir[0] === '/') {
                $candidates[] = $dir;
            } elseif ($pwd !== null && $pwd !== '' && $pwd[0] === '/') {
                $candidates[] = $pwd . '/' . $dir;
            }
        }
        if ($pwd !== null && $pwd !== '' && $pwd[0] === '/') {
            $candidates[] = $pwd;
        }
        foreach ($candidates as $candidate) {
            if ((realpath($candidate) ?: null) === $real) {
                return self::normalize($candidate);
            }
        }
        return $basePath;
    }

    /**
     * `$path` expressed through `$appPath` when it lies inside the application (`$basePath`, the
     * resolved release); any other path unchanged.
     */
    public static function rebase(string $path, string $basePath, string $appPath): string
    {
        $base = rtrim(realpath($basePath) ?: $basePath, '/');
        foreach (array_unique([rtrim($basePath, '/'), $base]) as $prefix) {
            if ($path === $prefix) {
                return $appPath;
            }
            if (str_starts_with($path, $prefix . '/')) {
                return $appPath . substr($path, strlen($prefix));
            }
        }
        return $path;
    }

    /** `a/./b//c/../d` → `a/b/d`, lexically: never through the file system, so symlinks stay. */
    private static function normalize(string $path): string
    {
        $parts = [];
        foreach (explode('/', $path) as $part) {
            if ($part === '' || $part === '.') {
                continue;
            }
            if ($part === '..') {
                array_pop($parts);
                continue;
            }
            $parts[] = $part;
        }
        return '/' . implode('/', $parts);
    }
}
