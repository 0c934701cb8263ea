<?php

namespace Drover\Dashboard;

/**
 * The next steps of a chain (`Bus::chain([...])`, `->chain([...])`): the classes of the jobs a
 * job's serialized command carries in its `chained` property, in order, read from PHP's
 * serialization grammar by lengths — never unserialize(), which would load and wake the
 * application's classes. Only class names: the job's page hands it the redacted payload
 * (Redaction::row), whose chained jobs are redacted in turn. Pure.
 */
final class ChainedJobs
{
    /** @return list<string> the classes, first to run next first; [] when none or unreadable */
    public static function of(?array $payload): array
    {
        $command = $payload['data']['command'] ?? null;
        if (!is_string($command)) {
            return [];
        }
        $at = strpos($command, 's:7:"chained";a:');
        if ($at === false) {
            return [];
        }
        $pos = $at + strlen('s:7:"chained";a:');
        $count = self::number($command, $pos, ':');
        if ($count === null || substr($command, $pos, 1) !== '{') {
            return [];
        }
        $pos++;
        $classes = [];
        for ($i = 0; $i < $count && $i < 100; $i++) {
            // i:N; then s:LEN:"<serialized job>";
            if (substr($command, $pos, 2) !== 'i:' || ($end = strpos($command, ';', $pos)) === false) {
                return $classes;
            }
            $pos = $end + 1;
            if (substr($command, $pos, 2) !== 's:') {
                return $classes;
            }
            $pos += 2;
            $length = self::number($command, $pos, ':');
            if ($length === null || substr($command, $pos, 1) !== '"') {
                return $classes;
            }
            if ($pos + $length + 3 > strlen($command) || substr($command, $pos + 1 + $length, 2) !== '";') {
                return $classes; // truncated
            }
            $job = substr($command, $pos + 1, $length);
            $pos += $length + 3; // the quotes and the semicolon
            if (preg_match('/^O:\d+:"([^"]+)"/', $job, $m) === 1) {
                $classes[] = $m[1];
            }
        }
        return $classes;
    }

    private static function number(string $s, int &$pos, string $until): ?int
    {
        $end = strpos($s, $until, $pos);
        if ($end === false || $end === $pos || $end - $pos > 10 || !ctype_digit(substr($s, $pos, $end - $pos))) {
            return null;
        }
        $n = (int) substr($s, $pos, $end - $pos);
        $pos = $end + 1;
        return $n;
    }
}
