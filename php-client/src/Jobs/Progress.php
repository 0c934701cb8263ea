<?php

namespace Drover\Jobs;

/**
 * Writes a running job's progress (ReportsProgress) to drover.job_progress through
 * drover.job_progress(job, lease token, percent, note) (broker/migrations/0016_workflows.sql):
 * fenced by the job's lease, one narrow row per job, never drover.jobs itself.
 *
 * Its cost is bounded twice: here, at most one write a second per job (the first report and 100 %
 * always), so a loop reporting each row costs one statement a second; and in the database, which
 * keeps to the same rule whoever writes. The write goes outside any transaction the job holds open
 * on drover's connection (DroverJob::databaseOutsideTransaction) — a CompletesInTransaction job's
 * included — so the console sees it while the job runs, not only once it committed.
 */
final class Progress
{
    /** Nanoseconds between two writes of one job's progress. */
    public const EVERY_NS = 1_000_000_000;

    /**
     * When each running job's progress was last written (hrtime, ns), for as long as the job
     * object lives (one attempt).
     *
     * @var \WeakMap<DroverJob, int>|null
     */
    private static ?\WeakMap $writtenAt = null;

    /**
     * Reports $percent of $job (the job's `$this->job`; anything but a DroverJob writes nothing),
     * `$class` naming the job in messages. Whether it was written.
     *
     * @throws \InvalidArgumentException for a percentage outside 0..100
     */
    public static function report(mixed $job, int $percent, ?string $note, string $class): bool
    {
        if ($percent < 0 || $percent > 100) {
            throw new \InvalidArgumentException("drover: $class reported progress of $percent %; give a percentage from 0 to 100 (progress(40, 'parsed 4,000 rows'))");
        }
        if (!$job instanceof DroverJob) {
            return false;
        }
        $db = $job->databaseOutsideTransaction();
        if ($db === null) {
            return false;
        }
        self::$writtenAt ??= new \WeakMap();
        $now = hrtime(true);
        $last = self::$writtenAt[$job] ?? null;
        if ($percent !== 100 && $last !== null && $now - $last < self::EVERY_NS) {
            return false;
        }
        self::$writtenAt[$job] = $now;
        if ($note !== null) {
            $note = mb_substr(str_replace("\0", '', mb_scrub($note, 'UTF-8')), 0, 500, 'UTF-8');
        }
        return (bool) $db->selectOne(
            'SELECT drover.job_progress(?::bigint, ?::bigint, ?::integer, ?) AS written',
            [(string) $job->getJobId(), (string) $job->leaseToken(), (string) $percent, $note],
            false,
        )->written;
    }
}
