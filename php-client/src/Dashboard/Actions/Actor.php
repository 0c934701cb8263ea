<?php

namespace Drover\Dashboard\Actions;

use Illuminate\Http\Request;

/**
 * Who took an action, as the audit trail names them: the signed-in user (their id, and their
 * email or name where the model has one), or the environment for a dashboard open to all in
 * `local`; and the address the request came from.
 */
final class Actor
{
    public function __construct(public readonly string $name, public readonly ?string $source = null)
    {
    }

    public static function of(Request $request): self
    {
        $user = $request->user();
        if ($user === null) {
            $name = 'nobody signed in (' . app()->environment() . ')';
        } else {
            $id = method_exists($user, 'getAuthIdentifier') ? $user->getAuthIdentifier() : null;
            $label = $user->email ?? $user->name ?? null;
            $name = trim('#' . (is_scalar($id) ? (string) $id : '?') . ' ' . (is_string($label) ? $label : ''));
        }
        return new self(mb_substr($name, 0, 300), $request->ip());
    }

    /** An action from the command line: the OS user and the host. */
    public static function console(): self
    {
        $user = function_exists('posix_getpwuid') ? (posix_getpwuid(posix_geteuid())['name'] ?? null) : null;
        return new self('artisan (' . ($user ?? get_current_user()) . '@' . gethostname() . ')');
    }
}
