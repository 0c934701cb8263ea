<?php

namespace Drover\Http\Controllers;

use Drover\Dashboard\Limits;
use Drover\Dashboard\Payloads;
use Illuminate\Routing\Controller;
use Illuminate\Support\Facades\Artisan;
use Illuminate\Support\Facades\DB;

/**
 * Failed jobs, from Laravel's own failer (`failed_jobs`): list, detail with exception and stack,
 * retry (`queue:retry`) and forget (`queue:forget`) — the same paths as the artisan commands.
 */
class FailedJobsController extends Controller
{
    /**
     * The newest failed jobs (with $tag, only those tagged so), each with payload_array,
     * display_name, tags and key. Laravel's database failers are read newest first, PAGE rows (a
     * tag search reads more and keeps exact matches); other failers through their `all()`.
     *
     * @return list<object>
     */
    public static function failed(?string $tag = null): array
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
        $decorated = array_map([self::class, 'decorate'], $rows);
        return array_slice(Payloads::onlyTagged($decorated, $tag), 0, Limits::PAGE);
    }

    private static function decorate(object $failed): object
    {
        $payload = json_decode((string) ($failed->payload ?? ''), true);
        $failed->payload_array = is_array($payload) ? $payload : null;
        $failed->display_name = is_string($payload['displayName'] ?? null) ? $payload['displayName'] : '';
        $failed->tags = Payloads::tagsOf(is_array($payload) ? $payload : null);
        // What the failer's find(), retry and forget take: its `id` (the uuid for database-uuids).
        $failed->key = (string) $failed->id;
        $failed->exception_first_line = strtok((string) ($failed->exception ?? ''), "\n") ?: '';
        return $failed;
    }

    public function index()
    {
        return view('drover::failed', ['failed' => self::failed()]);
    }

    public function show(string $id)
    {
        $failed = app('queue.failer')->find($id);
        abort_if($failed === null, 404, "drover: failed job $id is not in failed_jobs");
        return view('drover::failed-job', ['failed' => self::decorate((object) $failed)]);
    }

    public function retry(string $id)
    {
        abort_if(app('queue.failer')->find($id) === null, 404, "drover: failed job $id is not in failed_jobs");
        Artisan::call('queue:retry', ['id' => [$id]]);
        return redirect()->route('drover.failed')->with('drover.flash', "Failed job $id was pushed back onto its queue.");
    }

    public function forget(string $id)
    {
        $forgotten = app('queue.failer')->forget($id);
        return redirect()->route('drover.failed')->with('drover.flash', $forgotten ? "Failed job $id was forgotten." : "Failed job $id was not found.");
    }
}
