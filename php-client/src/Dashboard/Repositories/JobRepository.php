<?php

namespace Drover\Dashboard\Repositories;

use Illuminate\Database\ConnectionInterface;
use Drover\Dashboard\Limits;
use Drover\Dashboard\Payloads;

/**
 * Jobs in drover.jobs: pending, delayed or running, in the claim's order, at most a page; one
 * job, or one waiting behind its group's head.
 */
final class JobRepository
{
    public function __construct(private ConnectionInterface $db)
    {
    }

    /**
     * Pending (available now), delayed or running (leased) jobs: per queue the next ones in the
     * claim's order (through jobs_ready; running ones through jobs_leased), at most PAGE in all;
     * with $tag only those tagged so.
     *
     * @return list<object>
     */
    public function jobs(string $kind, ?string $tag = null): array
    {
        $tagged = $tag !== null && $tag !== '';
        // A tag search reads more candidates: the exact match is made after (see onlyTagged).
        $limit = $tagged ? Limits::PAGE * 10 : Limits::PAGE;
        $columns = 'id, queue, priority, attempts, available_at, created_at, lease_expires_at, payload, failure';
        [$tagWhere, $bindings] = $tagged ? Payloads::tagged($tag) : ['true', []];
        if ($kind === 'running') {
            $rows = $this->db->select(
                "SELECT $columns FROM drover.jobs WHERE lease_token IS NOT NULL AND $tagWhere ORDER BY lease_expires_at LIMIT $limit",
                $bindings
            );
        } else {
            $due = $kind === 'delayed' ? 'available_at > now()' : 'available_at <= now()';
            $names = (new QueueRepository($this->db))->queueNames();
            if ($names === []) {
                return [];
            }
            $list = '{' . implode(',', array_map(fn ($n) => '"' . addcslashes($n, '"\\') . '"', $names)) . '}';
            $rows = $this->db->select(
                "SELECT j.* FROM unnest(?::text[]) AS q(name)
                 CROSS JOIN LATERAL (
                     SELECT $columns FROM drover.jobs
                     WHERE queue = q.name AND lease_token IS NULL AND $due AND $tagWhere
                     ORDER BY priority DESC, available_at, id
                     LIMIT $limit
                 ) AS j
                 ORDER BY j.available_at, j.id
                 LIMIT $limit",
                array_merge([$list], $bindings)
            );
        }
        return array_slice(Payloads::onlyTagged(array_map([Payloads::class, 'decode'], $rows), $tag), 0, Limits::PAGE);
    }

    /** A job in drover.jobs, or waiting behind its group's head; with `group` (GroupRepository::of) when grouped. */
    public function job(int $id): ?object
    {
        $row = $this->db->selectOne('SELECT id, queue, priority, attempts, max_attempts, available_at, created_at, lease_expires_at, lease_owner, lease_token, payload, failure FROM drover.jobs WHERE id = ?', [$id]);
        $groups = new GroupRepository($this->db);
        $row ??= $groups->waitingJob($id);
        if ($row === null) {
            return null;
        }
        $row = Payloads::decode($row, true);
        $row->group = $groups->of($id);
        return $row;
    }
}
