<?php

namespace Drover\Http\Middleware;

use Closure;
use Illuminate\Support\Facades\Gate;

/**
 * Who may see the dashboard, as Horizon decides: anyone in the `local` environment; elsewhere
 * those the application's `viewDrover` gate allows (define it in a service provider, e.g.
 * `Gate::define('viewDrover', fn ($user) => in_array($user->email, [...]))`). Without such a gate,
 * nobody outside `local`; a guest never passes a gate that expects a user.
 */
class Authorize
{
    public function handle($request, Closure $next)
    {
        if (app()->environment('local') || Gate::allows('viewDrover', [$request->user()])) {
            // Every page knows whether to show its buttons (AuthorizeOperate decides).
            \Illuminate\Support\Facades\View::share('canOperate', AuthorizeOperate::allows($request));
            return $next($request);
        }
        abort(403, 'drover: this dashboard is for those the viewDrover gate allows');
    }
}
