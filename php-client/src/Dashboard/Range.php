<?php

namespace Drover\Dashboard;

/**
 * The time a chart covers, and the step its points are read at: the last hour by the minute,
 * the last day by the quarter hour, the last week by two hours (each under a hundred points).
 * The master keeps `metrics.trim` minutes of metrics (a day by default): a week's chart needs
 * `trim` of 10080 or more to be full.
 */
enum Range: string
{
    case Hour = 'hour';
    case Day = 'day';
    case Week = 'week';

    public static function fromQuery(mixed $value): self
    {
        return is_string($value) ? (self::tryFrom($value) ?? self::Hour) : self::Hour;
    }

    public function minutes(): int
    {
        return match ($this) {
            self::Hour => 60,
            self::Day => 1440,
            self::Week => 10080,
        };
    }

    /** Minutes per point. */
    public function step(): int
    {
        return match ($this) {
            self::Hour => 1,
            self::Day => 15,
            self::Week => 120,
        };
    }

    public function label(): string
    {
        return match ($this) {
            self::Hour => 'last hour, per minute',
            self::Day => 'last day, per 15 minutes',
            self::Week => 'last week, per 2 hours',
        };
    }
}
