<?php

namespace Drover\Console;

/**
 * What `php artisan drover` (and `queue:work` on a drover connection) does when it was started as
 * root (docs/security.md, "Who runs as whom"). By the time it runs, the application has booted as
 * root once — its service providers, `vendor/`, `bootstrap/cache/*.php` — which only the service's
 * definition can prevent (the shipped units start PHP as the application's user). From here on
 * nothing more runs as root:
 *
 * - with `drover.user` (DROVER_USER) naming another user: `php artisan drover` hands over to
 *   `drover launch --user USER`, which becomes that user before PHP starts again, so the master,
 *   its contract and its state are that user's; `queue:work` is refused (run it as that user);
 * - without one: a laptop's `sudo`, warned; refused in production, where it would run every job
 *   as root.
 */
final class RootStart
{
    public const GO_ON = 'go on';

    public const BECOME_USER = 'become the user';

    public const REFUSE = 'refuse';

    /**
     * The decision for a process of $euid, with drover.user $user, in $environment.
     */
    public static function decide(int $euid, ?string $user, string $environment): string
    {
        if ($euid !== 0) {
            return self::GO_ON;
        }
        if ($user !== null && $user !== '' && $user !== 'root') {
            return self::BECOME_USER;
        }
        return $environment === 'production' ? self::REFUSE : self::GO_ON;
    }

    /** The schema of the first release whose binary has `drover launch` (0.2.0's is 10). */
    public const LAUNCH_SCHEMA = 14;

    /**
     * Whether `$binary` has `drover launch`. A binary of the previous release does not (a
     * rolling upgrade with the package first): then root goes on as 0.2 did — the master runs as
     * root and starts its workers as the user — and says to upgrade the binary. Unknown (a binary
     * that does not answer): assumed to.
     */
    public static function binaryLaunches(string $binary): bool
    {
        try {
            return \Drover\Binary::describe($binary)['schema'] >= self::LAUNCH_SCHEMA;
        } catch (\RuntimeException) {
            return true;
        }
    }

    /** What is said when root cannot hand over: the binary is of the previous release. */
    public static function olderBinary(string $binary, string $user): string
    {
        return "drover: the drover binary $binary is of an older release, without `drover launch`: the master starts as root, as before, and runs its workers as $user; upgrade the binary so that nothing runs as root (docs/upgrading.md)";
    }

    /** This process's effective user id (0 when posix is missing: assumed root, the safe side). */
    public static function euid(): int
    {
        return function_exists('posix_geteuid') ? posix_geteuid() : 0;
    }

    /** Why a root start was refused in production, with the fix. */
    public static function refusal(): string
    {
        return 'drover: php artisan drover runs as root in production with no drover.user: every job would run as root. '
            . 'Start it as the application\'s user (User= in the unit; the .deb\'s drover@.service does, with DROVER_USER in /etc/drover/APP.env), '
            . 'or set DROVER_USER (docs/security.md)';
    }

    /** What is said when root hands over to $user. */
    public static function handover(string $user): string
    {
        return "drover: php artisan drover was started as root, so the application has booted as root once; it starts again as $user now (drover launch), "
            . "and nothing of it runs as root from here on. Start the service as $user instead (User=$user in the unit, or the .deb's drover@.service; docs/security.md)";
    }

    /** The warning for a root start on a laptop. */
    public static function warning(): string
    {
        return 'drover: running as root with no drover.user: the workers run your jobs as root. Fine on a laptop; in production start it as the application\'s user (docs/security.md)';
    }

    /**
     * `drover launch`'s arguments to start `php APP/artisan drover $flags` again as $user.
     *
     * @param list<string> $flags
     * @return list<string>
     */
    public static function launchArguments(string $user, string $appPath, string $php, array $flags): array
    {
        return array_merge(['launch', '--user', $user, '--app', $appPath, '--php', $php, '--'], $flags);
    }
}
