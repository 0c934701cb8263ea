<?php

namespace Drover\Http\Controllers;

use Drover\Dashboard\Reader;
use Illuminate\Routing\Controller;
use Illuminate\Support\Facades\Artisan;

/**
 * Failed jobs, from Laravel's own failer (`failed_jobs`): list, detail with exception and stack,
 * retry (`queue:retry`) and forget (`queue:forget`) — the same paths as the artisan commands.
 */
class FailedJobsController extends Controller
{
    /** @return list<object> the newest failed jobs, each with payload_array, display_name, tags */
    public static function failed(): array
    {
        $all = array_slice((array) app('queue.failer')->all(), 0, Reader::PAGE);
        return array_map([self::class, 'decorate'], $all);
    }

    private static function decorate(object $failed): object
    {
        $payload = json_decode((string) ($failed->payload ?? ''), true);
        $failed->payload_array = is_array($payload) ? $payload : null;
        $failed->display_name = $payload['displayName'] ?? '';
        $failed->tags = is_array($payload['tags'] ?? null) ? $payload['tags'] : [];
        $failed->key = (string) ($failed->uuid ?? $failed->id);
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
