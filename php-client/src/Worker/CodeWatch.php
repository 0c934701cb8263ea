<?php

namespace Drover\Worker;

/**
 * Whether PHP code this worker has loaded was changed on disk since it booted: for `queue:listen`
 * on a drover connection, where an edit must run on the next job. A job's own class is loaded when
 * the job runs, so a fresh worker reads it anew; what was loaded at boot — service providers,
 * config, listeners, models a provider touched — is what this watches: the modification time of
 * every file loaded by then (and its size), compared before each job (one stat per file, a few
 * hundred: well under a millisecond).
 */
final class CodeWatch
{
    /** @param array<string, string> $stamps file => modification time and size when booted */
    private function __construct(private readonly array $stamps)
    {
    }

    /** The files loaded so far, as they are now (call once the application has booted). */
    public static function snapshot(): self
    {
        clearstatcache();
        $stamps = [];
        foreach (get_included_files() as $file) {
            $stamps[$file] = self::stamp($file);
        }
        return new self($stamps);
    }

    /**
     * Modification time and size: PHP reads mtimes in whole seconds, so an edit within the second
     * of the snapshot is still seen when it changes the file's size.
     */
    private static function stamp(string $file): string
    {
        $stat = @stat($file);
        return $stat === false ? 'gone' : $stat['mtime'] . ':' . $stat['size'];
    }

    /** The first file of the snapshot modified or removed since, or null when none was. */
    public function changed(): ?string
    {
        clearstatcache();
        foreach ($this->stamps as $file => $stamp) {
            if (self::stamp($file) !== $stamp) {
                return $file;
            }
        }
        return null;
    }
}
