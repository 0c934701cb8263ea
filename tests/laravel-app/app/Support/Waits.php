<?php

namespace App\Support;

use Illuminate\Support\Facades\Cache;
use Illuminate\Support\Facades\DB;

/**
 * Timing for the matrix's retry cases, in a form both runners can match exactly.
 *
 * Laravel's database driver stores available_at in whole seconds (a release of N seconds at
 * t makes the job due at floor(t) + N), drover to the microsecond. A job that measures its own
 * retry therefore fails just after a second begins (markFailure), so that both make it wait N
 * seconds less a few milliseconds, and journals the wait as a bucket (bucket): `waited_Ns` for
 * N - 0.25 <= waited < N + 0.75, early by a quarter second at most, late by three quarters.
 */
final class Waits
{
    /** Sleeps into the next second, then records the time under $key (shared by every worker). */
    public static function markFailure(string $key): void
    {
        $now = microtime(true);
        usleep((int) ((ceil($now) - $now + 0.02) * 1_000_000));
        Cache::forever($key, microtime(true));
    }

    /** Seconds since markFailure($key). */
    public static function since(string $key): float
    {
        return microtime(true) - (float) Cache::get($key, 0);
    }

    /** `waited_Ns`, N the whole second the wait is closest to (biased late, see above). */
    public static function bucket(float $waited): string
    {
        return 'waited_' . (int) floor($waited + 0.25) . 's';
    }

    /**
     * Waits (up to 10 s) until the job labelled $label journaled $event, as a job that holds a
     * lock or a rate limit waits for the job it contends with; false if it never did.
     */
    public static function forJournal(string $label, string $event): bool
    {
        return self::until(fn () => DB::table('journal')->where('label', $label)->where('event', $event)->exists());
    }

    /** Waits (up to 10 s) until $holds answers true; false if it never did. */
    public static function until(callable $holds): bool
    {
        $deadline = microtime(true) + 10;
        while (microtime(true) < $deadline) {
            if ($holds()) {
                return true;
            }
            usleep(20_000);
        }
        return false;
    }
}
