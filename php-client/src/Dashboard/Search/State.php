<?php

namespace Drover\Dashboard\Search;

/**
 * Where a job is, as the console's search names it. Each state is read from one place
 * (Sources): pending, delayed and running from drover.jobs; held from the jobs waiting behind a
 * group's head or for a limit; completed from the history (drover.recent_jobs); failed from
 * Laravel's failer; kept from drover.failed_jobs, where drover keeps what Laravel's failer could
 * not take (an unreadable payload, a failer that was down).
 */
enum State: string
{
    case Pending = 'pending';
    case Delayed = 'delayed';
    case Running = 'running';
    case Held = 'held';
    case Completed = 'completed';
    case Failed = 'failed';
    case Kept = 'kept';

    public function label(): string
    {
        return match ($this) {
            self::Pending => 'Pending',
            self::Delayed => 'Delayed',
            self::Running => 'Running',
            self::Held => 'Held (group, limit)',
            self::Completed => 'Completed',
            self::Failed => 'Failed',
            self::Kept => 'Failed, kept by drover',
        };
    }

    /**
     * The filters that mean something in this state: a filter set for another is refused with
     * what it applies to, never silently ignored.
     *
     * @return list<string>
     */
    public function filters(): array
    {
        $common = ['queue', 'class', 'tag', 'batch', 'text', 'since', 'until'];
        return match ($this) {
            self::Pending, self::Delayed => [...$common, 'group', 'attempts', 'exception'],
            self::Running => [...$common, 'group', 'attempts', 'exception', 'host'],
            self::Held => [...$common, 'group', 'limit'],
            self::Completed => [...$common, 'host', 'attempts'],
            self::Failed => [...$common, 'exception'],
            self::Kept => [...$common, 'attempts', 'exception'],
        };
    }

    /** What the time range reads in this state. */
    public function timeColumn(): string
    {
        return match ($this) {
            self::Pending, self::Delayed, self::Running, self::Held => 'dispatched',
            self::Completed => 'finished',
            self::Failed, self::Kept => 'failed',
        };
    }
}
