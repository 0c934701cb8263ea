<?php

namespace Drover\Worker;

use Drover\Jobs\DroverJob;

/**
 * The failure of a job an operator stopped while it ran: what its `failed()` method, JobFailed
 * listeners and Laravel's failer see. Built from the master's note (`stopped:fail:<who>` or
 * `stopped:release:<who>`, src/rules/stop_request.rs).
 */
final class JobStopped extends \RuntimeException
{
    public const PREFIX = 'stopped:';

    public function __construct(string $message, public readonly bool $release, public readonly string $by)
    {
        parent::__construct($message);
    }

    /** The stop a master's note asks for, or null when the note is another (a timeout's). */
    public static function fromRequest(string $note, DroverJob $job): ?self
    {
        if (!str_starts_with($note, self::PREFIX)) {
            return null;
        }
        $parts = explode(':', substr($note, strlen(self::PREFIX)), 2);
        $release = $parts[0] === 'release';
        $by = $parts[1] ?? 'an operator';
        return new self(
            $job->resolveName() . " was stopped by $by while it ran (attempt {$job->attempts()}); drover killed its worker",
            $release,
            $by,
        );
    }
}
