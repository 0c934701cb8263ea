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
