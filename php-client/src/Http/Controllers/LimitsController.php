<?php

namespace Drover\Http\Controllers;

use Drover\Dashboard\Repositories\LimitRepository;
use Illuminate\Routing\Controller;

/**
 * Limits (docs/limits.md): the keys jobs wait for, most waited for first — the jobs in each
 * key's line, the concurrency slots held, the rate used in its window, the oldest wait — and the
 * fair queues of this application.
 */
class LimitsController extends Controller
{
    public function index()
    {
        $db = \Drover\Dashboard\DashboardDatabase::connection();
        return view('drover::limits', [
            'keys' => (new LimitRepository($db))->keys(),
            'fair' => array_values(array_map('strval', (array) (config('drover.fair') ?? []))),
        ]);
    }
}
