<?php

namespace Drover\Dashboard\Actions;

use Drover\Dashboard\Repositories\ActionLogRepository;
use Illuminate\Database\ConnectionInterface;

/**
 * The audit trail (drover.console_actions, migration 0014): every action taken from the console —
 * who, what, on which jobs, when and how it ended — newest first, kept `dashboard.audit_days`
 * days (default 90). A bulk action's row is also its progress. Its rows are
 * ActionLogRepository's; here, what is recorded and how it is shown.
 */
final class ActionLog
{
    /** Days an action is kept when drover.dashboard.audit_days is not set. */
    public const DEFAULT_DAYS = 90;

    private ActionLogRepository $rows;

    public function __construct(ConnectionInterface $db)
    {
        $this->rows = new ActionLogRepository($db);
    }

    /**
     * An action done at once (one job's retry, a queue's pause, ...): recorded done, or failed
     * with why. Returns its id.
     *
     * @param array<string, mixed> $target
     */
    public function done(Actor $actor, string $verb, array $target, string $outcome, bool $ok = true, ?int $acted = null): int
    {
        $this->trim();
        return $this->rows->recordDone($actor, $verb, self::json($target), $ok ? 'done' : 'failed', $acted ?? ($ok ? 1 : 0), $outcome);
    }

    /**
     * A bulk action, requested: it runs in the background (Bulk) on what its preview matched.
     * Returns its id.
     *
     * @param array<string, mixed> $target the search (its query, free-text filters withheld:
     *        Redaction::search), the preview (Preview::record) and, for a move, the queue
     * @param ?int $matched what the preview counted, when it counted every match
     * @param string $upto the newest key of the search's state when it was previewed: the action
     *        touches nothing newer
     */
    public function request(Actor $actor, Verb $verb, array $target, ?int $matched, string $upto): int
    {
        $this->trim();
        return $this->rows->recordRequested($actor, $verb->value, self::json($target), $matched, $upto);
    }

    /** One action, with its target decoded, or null. */
    public function find(int $id): ?object
    {
        $row = $this->rows->find($id);
        return $row === null ? null : self::decode($row);
    }

    /**
     * The newest actions, before id $before (null: the newest), at most $limit.
     *
     * @return list<object>
     */
    public function recent(int $limit, ?int $before = null): array
    {
        return array_map([self::class, 'decode'], $this->rows->recent($limit, $before));
    }

    /**
     * The keys a bulk action settled, batch by batch, at most $limit.
     *
     * @return list<string>
     */
    public function keys(int $id, int $limit): array
    {
        return $this->rows->keys($id, $limit);
    }

    /** Removes actions older than the retention (drover.dashboard.audit_days; 0 keeps them all). */
    public function trim(): int
    {
        $days = config('drover.dashboard.audit_days', self::DEFAULT_DAYS);
        if (!is_numeric($days) || (float) $days <= 0) {
            return 0;
        }
        return $this->rows->deleteOverOlderThan((int) $days);
    }

    /**
     * A row as the audit pages show it, to every viewer: its search with the free-text filters
     * withheld (rows recorded before they were withheld included) and described from that, its
     * outcome redacted (Redaction::row).
     */
    private static function decode(object $row): object
    {
        $target = json_decode((string) $row->target, true);
        $target = is_array($target) ? $target : [];
        if (is_array($target['search'] ?? null)) {
            $target['search'] = \Drover\Dashboard\Redaction::search($target['search']);
            [$filter] = \Drover\Dashboard\Search\JobFilter::fromQuery($target['search']);
            $target['described'] = $filter !== null ? $filter->describe() : 'a search that no longer reads (' . implode(', ', array_keys($target['search'])) . ')';
        }
        $row->target = $target;
        $row->described = \Drover\Dashboard\Redaction::fromConfig()->text(self::describe($target));
        return \Drover\Dashboard\Redaction::fromConfig()->row($row);
    }

    /** What an action was taken on, in words. */
    public static function describe(array $target): string
    {
        $words = match (true) {
            isset($target['described']) => (string) $target['described'],
            isset($target['workflow']) => (isset($target['step']) ? 'step ' . $target['step'] . ' (node “' . ($target['node'] ?? '?') . '”) of ' : '')
                . 'workflow ' . $target['workflow'] . (isset($target['name']) ? ' “' . $target['name'] . '”' : '')
                . (isset($target['signal']) ? ', signal “' . $target['signal'] . '”' . (isset($target['bytes']) ? ' (' . (int) $target['bytes'] . ' bytes of data)' : '') : ''),
            isset($target['failed']) => 'failed job ' . $target['failed'],
            isset($target['task']) => 'scheduled task ' . $target['task'],
            isset($target['batch']) => 'batch ' . $target['batch'],
            isset($target['pool']) => 'pool ' . $target['pool'] . ' of ' . ($target['master'] ?? '?') . ', to ' . ($target['processes'] ?? '?') . ' processes',
            isset($target['master']) => 'the master on ' . $target['master'],
            isset($target['job']) => 'job ' . $target['job'],
            isset($target['queue']) => 'queue ' . $target['queue'],
            default => (string) json_encode($target, JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES),
        };
        if (isset($target['search'], $target['queue'])) {
            $words .= ', to queue ' . $target['queue'];
        }
        return $words;
    }

    private static function json(array $value): string
    {
        return (string) json_encode($value, JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE);
    }
}
