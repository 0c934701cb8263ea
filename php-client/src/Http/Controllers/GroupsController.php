<?php

namespace Drover\Http\Controllers;

use Drover\Dashboard\Repositories\GroupRepository;
use Illuminate\Http\Request;
use Illuminate\Routing\Controller;

/**
 * Ordered groups (docs/ordered-groups.md): per queue, the held groups with the failed job that
 * holds each (retry and forget through the failed-job pages' own buttons), the longest-waiting
 * heads, and one group's jobs in the order they will run.
 */
class GroupsController extends Controller
{
    private function groups(): GroupRepository
    {
        return new GroupRepository(\Drover\Dashboard\DashboardDatabase::connection());
    }

    public function index()
    {
        $groups = $this->groups();
        $held = $groups->held();
        foreach ($held as $h) {
            // A failure Laravel's failer recorded is told best by its exception there.
            $failed = $h->held_uuid === null ? null : app('queue.failer')->find($h->held_uuid);
            $exception = is_object($failed) || is_array($failed) ? (string) (((object) $failed)->exception ?? '') : '';
            $h->error = $exception !== '' ? (strtok($exception, "\n") ?: $exception) : (string) $h->held_error;
            \Drover\Dashboard\Redaction::fromConfig()->row($h);
        }
        return view('drover::groups', [
            'queues' => $groups->queues(),
            'held' => $held,
            'oldest' => $groups->oldestHeads(),
        ]);
    }

    public function show(Request $request)
    {
        $queue = $request->query('queue');
        $name = $request->query('name');
        abort_unless(is_string($queue) && is_string($name) && $name !== '', 404, 'drover: name a group with ?queue=...&name=...');
        $groups = $this->groups();
        $group = $groups->group($queue, $name);
        abort_if($group === null, 404, "drover: group $name of queue $queue has no job (a group is gone with its last settle)");
        return view('drover::group', ['group' => $group, 'jobs' => $groups->jobs($queue, $name)]);
    }
}
