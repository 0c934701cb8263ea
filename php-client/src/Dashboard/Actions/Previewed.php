<?php

namespace Drover\Dashboard\Actions;

use Drover\Dashboard\Search\State;

/**
 * Whether a row is one a bulk action's preview matched: the SQL conditions, in one place
 * (docs/dashboard.md, "Acting on all that match", "Only what was previewed").
 *
 * A preview records the database's time `at` and `horizon`, the oldest transaction still open
 * then (`txid_snapshot_xmin(txid_current_snapshot())`). A row is as the preview saw it when
 *
 * - its current version was written by a transaction older than the horizon — committed before
 *   the preview, so nothing has changed it since: not claimed, released, retried, moved or
 *   promoted from a group or a limit (each writes a new version of the row, or a new row); and
 * - for pending and delayed jobs, which become due without a write, its due time says the same
 *   state at `at`: pending `available_at <= at`, delayed `available_at > at`.
 *
 * The search's own filters are on values such a row still has, so it matched then exactly when
 * it matches now. A row written by a transaction still open at the preview, or one that began
 * writing before it and committed after, counts as changed (never as previewed): subtransactions
 * are not in a snapshot's list, so "older than the horizon" is the test that cannot be wrong.
 *
 * A row's `xmin` is 32 bits; it is read against the 64-bit snapshot of the statement that reads
 * it (so a version written after that statement's snapshot, as a row re-read under its lock can
 * be, is never taken for an old one), and a frozen or bootstrap one (1, 2) is old.
 */
final class Previewed
{
    /** The row version's transaction, as a 64-bit txid distance from the statement's snapshot. */
    private const DISTANCE = '(((txid_snapshot_xmax(txid_current_snapshot()) & 4294967295) - %1$s::text::bigint + 4294967296) %% 4294967296)';

    /**
     * The condition that row version $xmin (a column holding a row's xmin) was written before the
     * preview's horizon: one binding, the horizon.
     */
    public static function unchanged(string $xmin): string
    {
        $distance = sprintf(self::DISTANCE, $xmin);
        return "($xmin::text::bigint < 3 OR ($distance < 2147483648 AND txid_snapshot_xmax(txid_current_snapshot()) - $distance < ?::bigint))";
    }

    /**
     * The condition that a search's row (of the relation Search\Source gives: `s.row_xmin`,
     * `s.available_at`) is one the preview matched, and its bindings.
     *
     * @return array{0: string, 1: list<string>}
     */
    public static function condition(State $state, string $at, string $horizon): array
    {
        $sql = self::unchanged('s.row_xmin');
        $bindings = [$horizon];
        if ($state === State::Pending) {
            $sql .= ' AND s.available_at <= ?::timestamptz';
            $bindings[] = $at;
        } elseif ($state === State::Delayed) {
            $sql .= ' AND s.available_at > ?::timestamptz';
            $bindings[] = $at;
        }
        return [$sql, $bindings];
    }
}
