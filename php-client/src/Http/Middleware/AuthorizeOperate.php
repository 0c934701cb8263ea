<?php

namespace Drover\Http\Middleware;

use Closure;
use Illuminate\Support\Facades\Gate;

/**
 * Who may act from the dashboard — retry, forget, delete, move, release, pause, run now — beside
 * who may look (Authorize, viewDrover): those the application's `operateDrover` gate allows;
 * where no such gate is defined, anyone in the `local` environment and nobody elsewhere. Without
 * it the pages are read-only and show no buttons, and every action's route answers 403.
 */
class AuthorizeOperate
{
    public function handle($request, Closure $next)
    {
        if (self::allows($request)) {
            return $next($request);
        }
        abort(403, 'drover: acting from this dashboard is for those the operateDrover gate allows');
    }

    public static function allows($request): bool
    {
        if (Gate::has('operateDrover')) {
            return Gate::allows('operateDrover', [$request->user()]);
        }
        return app()->environment('local');
    }
}
