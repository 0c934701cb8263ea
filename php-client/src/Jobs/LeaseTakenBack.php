<?php

namespace Drover\Jobs;

/**
 * A job tried to complete after its lease was taken back while it ran (its worker was frozen or
 * cut off, or its master was declared gone): `drover.complete_within` refused with SQLSTATE
 * DRL01 (broker/migrations/0015_exactly_once.sql). The transaction it was called in rolled back
 * with everything the job wrote in it, and the job runs where its lease is held now.
 *
 * The worker does not run Laravel's failure path for it (no failed_jobs row, no `failed()`): it
 * reports the job released (at once: the master's settle then matches nothing, the lease being
 * someone else's), logs it, and hands it to the application's exception handler.
 */
final class LeaseTakenBack extends \RuntimeException
{
    /** The SQLSTATE `drover.complete_within` raises when the caller no longer holds the lease. */
    public const SQLSTATE = 'DRL01';

    public function __construct(
        public readonly int $jobId,
        public readonly int $token,
        /** The job's class (Laravel's resolveName()). */
        public readonly string $jobName,
        ?\Throwable $previous = null,
    ) {
        parent::__construct(
            "drover: job $jobId ($jobName) no longer holds its lease (token $token): it was taken back while the job ran "
            . '(its worker was frozen or cut off, or its master was declared gone). Everything the job wrote in the transaction '
            . 'that was to complete it was rolled back, and the job runs where its lease is held now; this attempt is not failed.',
            0,
            $previous,
        );
    }

    /** Whether $e is the database's refusal to complete a job whose lease was taken back (SQLSTATE DRL01), or wraps it. */
    public static function isRefusal(\Throwable $e): bool
    {
        for ($cause = $e; $cause !== null; $cause = $cause->getPrevious()) {
            if ($cause instanceof self || self::sqlState($cause) === self::SQLSTATE) {
                return true;
            }
        }
        return false;
    }

    /**
     * $e as a LeaseTakenBack for $job: itself, the one it wraps, or a new one around the
     * database's refusal it is or wraps; null when it is neither.
     */
    public static function from(\Throwable $e, DroverJob $job): ?self
    {
        for ($cause = $e; $cause !== null; $cause = $cause->getPrevious()) {
            if ($cause instanceof self) {
                return $cause;
            }
        }
        return self::isRefusal($e) ? new self((int) $job->getJobId(), $job->leaseToken(), $job->resolveName(), $e) : null;
    }

    /**
     * The SQLSTATE of a database error: PDO's errorInfo (which Laravel's QueryException copies),
     * else its code, which PDO sets to the SQLSTATE. Never the message.
     */
    private static function sqlState(\Throwable $e): ?string
    {
        $info = property_exists($e, 'errorInfo') ? $e->errorInfo : null;
        if (is_array($info) && is_string($info[0] ?? null)) {
            return $info[0];
        }
        $code = $e->getCode();
        return $e instanceof \PDOException || $e instanceof \Illuminate\Database\QueryException ? (is_string($code) ? $code : null) : null;
    }
}
