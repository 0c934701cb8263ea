<?php

namespace Drover\Dashboard\Repositories;

use Illuminate\Database\ConnectionInterface;
use Drover\Dashboard\Limits;
use Drover\Dashboard\Payloads;

/**
 * Completed jobs from the history (drover.recent_jobs, when `metrics.history` is on), newest
 * first.
 */
final class CompletedJobRepository
{
    public function __construct(private ConnectionInterface $db)
    {
    }

    /** Completed jobs, newest first (the history, when it is on). @return list<object> */
    public function completed(?string $tag = null): array
    {
        if (!$this->hasHistory()) {
            return [];
        }
        $tagged = $tag !== null && $tag !== '';
        [$where, $bindings] = $tagged ? Payloads::tagged($tag) : ['true', []];
        $limit = $tagged ? Limits::PAGE * 10 : Limits::PAGE;
        return array_slice(Payloads::onlyTagged(array_map([Payloads::class, 'decode'], $this->db->select(
            "SELECT id, attempt, queue, class, payload, hostname, worker_pid, started_at, finished_at, runtime_ms, wait_ms, cpu_ms, memory_kib
             FROM drover.recent_jobs WHERE $where ORDER BY finished_at DESC LIMIT $limit",
            $bindings
        )), $tag), 0, Limits::PAGE);
    }

    public function completedJob(int $id, int $attempt): ?object
    {
        if (!$this->hasHistory()) {
            return null;
        }
        $row = $this->db->selectOne('SELECT * FROM drover.recent_jobs WHERE id = ? AND attempt = ?', [$id, $attempt]);
        return $row === null ? null : Payloads::decode($row, true);
    }

    private function hasHistory(): bool
    {
        return (bool) $this->db->selectOne("SELECT to_regclass('drover.recent_jobs') IS NOT NULL AS present")->present;
    }
}
