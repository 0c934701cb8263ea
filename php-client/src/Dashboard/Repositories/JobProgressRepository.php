<?php

namespace Drover\Dashboard\Repositories;

use Drover\Dashboard\Redaction;
use Illuminate\Database\ConnectionInterface;

/**
 * A job's progress as it last reported it (`$this->progress(40, 'parsed 4,000 rows')`:
 * drover.job_progress, migration 0016, one row per job, kept an hour after the job left): its
 * percent, its note (redacted, as any text a page shows) and when.
 */
final class JobProgressRepository
{
    public function __construct(private ConnectionInterface $db)
    {
    }

    /** Job $id's last progress (`percent`, `note`, `at`), or null when it never reported any. */
    public function of(int $id): ?object
    {
        $row = $this->db->selectOne('SELECT percent, note, at FROM drover.job_progress WHERE job_id = ?', [$id]);
        if ($row !== null && $row->note !== null) {
            $row->note = Redaction::fromConfig()->text((string) $row->note);
        }
        return $row;
    }
}
