<?php

namespace Drover\Dashboard\Repositories;

use Drover\Dashboard\Limits;
use Drover\Dashboard\Payloads;
use Illuminate\Support\Facades\DB;

/**
 * Failed jobs, from Laravel's own failer (`queue.failed`: the application's `failed_jobs`, which
 * drover's workers write through the failer as queue:work does), each decorated for the
 * dashboard with payload_array, display_name, tags, key and exception_first_line.
 */
final class FailedJobRepository
{
    /**
     * The newest failed jobs (with $tag, only those tagged so). Laravel's database failers are
     * read newest first, PAGE rows (a tag search reads more and keeps exact matches); other
     * failers through their `all()`.
     *
     * @return list<object>
     */
    public function failed(?string $tag = null): array
    {
        $config = (array) config('queue.failed', []);
        $driver = $config['driver'] ?? null;
        $limit = $tag === null ? Limits::PAGE : Limits::PAGE * 10;
        if (in_array($driver, ['database', 'database-uuids'], true)) {
            $query = DB::connection($config['database'] ?? null)->table($config['table'] ?? 'failed_jobs');
            if ($tag !== null) {
                [$where, $bindings] = Payloads::tagged($tag);
                if ($query->getConnection()->getDriverName() === 'pgsql') {
                    $query->whereRaw($where, $bindings);
                }
            }
            $rows = $query->orderByDesc('id')->limit($limit)->get()->all();
            if ($driver === 'database-uuids') {
                // As the failer itself presents them: the uuid is the id retry and forget take.
                foreach ($rows as $row) {
                    $row->id = $row->uuid;
                }
            }
        } else {
            $rows = array_slice((array) app('queue.failer')->all(), 0, $limit);
        }
        $decorated = array_map(fn (object $row) => self::decorate($row, false), $rows);
        return array_slice(Payloads::onlyTagged($decorated, $tag), 0, Limits::PAGE);
    }

    /** One failed job by the id the failer's find(), retry and forget take, or null. */
    public function find(string $id): ?object
    {
        $failed = app('queue.failer')->find($id);
        return $failed === null ? null : self::decorate((object) $failed, true);
    }

    /**
     * The failed jobs whose payloads carry these uuids (a workflow's failed steps), as a list shows
     * them (no payload), by uuid. Laravel's database failers are asked by their `uuid` column (the
     * plain `database` failer's key is its integer id), any other failer by find(), which takes
     * the uuid.
     *
     * @param list<string> $uuids
     * @return array<string, object>
     */
    public function byUuids(array $uuids): array
    {
        $uuids = array_values(array_unique(array_filter($uuids, fn ($u) => is_string($u) && $u !== '')));
        if ($uuids === []) {
            return [];
        }
        $config = (array) config('queue.failed', []);
        $driver = $config['driver'] ?? null;
        if (in_array($driver, ['database', 'database-uuids'], true)) {
            $rows = DB::connection($config['database'] ?? null)->table($config['table'] ?? 'failed_jobs')
                ->whereIn('uuid', $uuids)->get()->all();
            if ($driver === 'database-uuids') {
                foreach ($rows as $row) {
                    $row->id = $row->uuid;
                }
            }
            $found = [];
            foreach ($rows as $row) {
                $found[(string) $row->uuid] = self::decorate($row, false);
            }
            return $found;
        }
        $found = [];
        foreach ($uuids as $uuid) {
            $row = app('queue.failer')->find($uuid);
            if ($row !== null) {
                $found[$uuid] = self::decorate((object) $row, false);
            }
        }
        return $found;
    }

    /**
     * The row as a page shows it: its key, class and tags, then Redaction::row() — the exception
     * (and its first line) redacted; on its own page ($page) the payload redacted, in a list none.
     */
    private static function decorate(object $failed, bool $page): object
    {
        $payload = json_decode((string) ($failed->payload ?? ''), true);
        $failed->display_name = is_string($payload['displayName'] ?? null) ? $payload['displayName'] : '';
        $failed->tags = Payloads::tagsOf(is_array($payload) ? $payload : null);
        // What the failer's find(), retry and forget take: its `id` (the uuid for database-uuids).
        $failed->key = (string) $failed->id;
        $failed->exception = (string) ($failed->exception ?? '');
        return \Drover\Dashboard\Redaction::fromConfig()->row($failed, $page);
    }
}
