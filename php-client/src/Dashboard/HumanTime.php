<?php

namespace Drover\Dashboard;

/**
 * Times as people read them on the dashboard: "3 min ago" or "in 2 h", with the exact time (in
 * the application's time zone) on hover. Pure, given the time now.
 */
final class HumanTime
{
    /** The relative words for $at as seen at $now. */
    public static function relative(\DateTimeInterface $at, \DateTimeInterface $now): string
    {
        $secs = $now->getTimestamp() - $at->getTimestamp();
        $ahead = $secs < 0;
        $secs = abs($secs);
        $words = match (true) {
            $secs < 5 => null,
            $secs < 60 => $secs . ' s',
            $secs < 3600 => intdiv($secs, 60) . ' min',
            $secs < 86400 => intdiv($secs, 3600) . ' h',
            default => intdiv($secs, 86400) . ' d',
        };
        if ($words === null) {
            return 'just now';
        }
        return $ahead ? "in $words" : "$words ago";
    }

    /** How long, in words: "850 ms", "12.5 s", "4 min 5 s", "2 h 3 min", "3 d 4 h". Null: a dash. */
    public static function duration(int|float|null $secs): string
    {
        if ($secs === null) {
            return '–';
        }
        $secs = max(0.0, (float) $secs);
        if ($secs < 1) {
            return (int) round($secs * 1000) . ' ms';
        }
        if ($secs < 60) {
            return ($secs < 10 ? number_format($secs, 1) : (string) (int) $secs) . ' s';
        }
        $s = (int) $secs;
        [$big, $small, $bigUnit, $smallUnit] = match (true) {
            $s < 3600 => [intdiv($s, 60), $s % 60, 'min', 's'],
            $s < 86400 => [intdiv($s, 3600), intdiv($s % 3600, 60), 'h', 'min'],
            default => [intdiv($s, 86400), intdiv($s % 86400, 3600), 'd', 'h'],
        };
        return "$big $bigUnit" . ($small > 0 ? " $small $smallUnit" : '');
    }

    /** A <time> element: relative words, the exact time on hover. Null or unreadable: a dash. */
    public static function html(mixed $at): string
    {
        if ($at === null || $at === '') {
            return '–';
        }
        try {
            $time = $at instanceof \DateTimeInterface ? $at : new \DateTimeImmutable((string) $at);
        } catch (\Exception) {
            return e((string) $at);
        }
        $zone = new \DateTimeZone((string) config('app.timezone', 'UTC'));
        $exact = \DateTimeImmutable::createFromInterface($time)->setTimezone($zone)->format('Y-m-d H:i:s T');
        return '<time datetime="' . e($time->format(\DATE_ATOM)) . '" title="' . e($exact) . '">' . e(self::relative($time, new \DateTimeImmutable())) . '</time>';
    }
}
