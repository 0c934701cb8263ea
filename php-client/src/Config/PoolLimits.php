<?php

namespace Drover\Config;

/**
 * Checks a pool's options against the master's own limits (MasterPoolOptions::LIMITS, generated
 * from the drover binary's table) and how its processes cover its queues, and says a problem in
 * the master's words: config/drover.php is refused here for what the master would refuse at
 * start. PoolLimitsTest checks these words against cases the binary's tests write out
 * (tests/fixtures/pool_limits.json).
 */
final class PoolLimits
{
    /**
     * Every problem of $pool's options (pool name => options), each said of "pool $name".
     *
     * @param array<string, mixed> $pool
     * @return list<string>
     */
    public static function problems(string $name, array $pool): array
    {
        $problems = [];
        foreach (MasterPoolOptions::LIMITS as $option => $limit) {
            $problem = self::problem($option, $limit, $pool[$option] ?? null);
            if ($problem !== null) {
                $problems[] = "pool $name: $problem";
            }
        }
        return $problems;
    }

    /**
     * What is wrong with $value for $option under $limit, or null. Values from env() arrive as
     * strings: a numeric string counts as its number.
     *
     * @param array<string, mixed> $limit one of MasterPoolOptions::LIMITS
     */
    public static function problem(string $option, array $limit, mixed $value): ?string
    {
        $shown = is_string($value) ? $value : json_encode($value);
        switch ($limit['kind']) {
            case 'whole':
                if ($value === null && $limit['null_ok']) {
                    return null;
                }
                $n = is_bool($value) ? false : filter_var($value, FILTER_VALIDATE_INT);
                if ($n !== false && $n >= $limit['min'] && $n <= $limit['max']) {
                    return null;
                }
                $orNull = $limit['null_ok'] ? ', or null' : '';
                return "$option must be a whole number from {$limit['min']} to {$limit['max']}$orNull{$limit['note']}, got $shown";
            case 'seconds':
                if (is_numeric($value)) {
                    $secs = (float) $value;
                    $low = $limit['zero_ok'] ? $secs >= 0 : $secs > 0;
                    if (is_finite($secs) && $low && $secs <= MasterPoolOptions::MAX_SECONDS && ($limit['zero_ok'] || $secs >= 1e-9)) {
                        return null;
                    }
                }
                $from = $limit['zero_ok'] ? 'from 0' : 'above 0 (1 ns at least)';
                return "$option must be a number of seconds $from and at most " . MasterPoolOptions::MAX_SECONDS . " (a year), got $shown";
            case 'one_of':
                if (is_string($value) && in_array($value, $limit['words'], true)) {
                    return null;
                }
                $words = $limit['words'];
                $last = array_pop($words);
                $listed = $words === [] ? $last : implode(', ', $words) . " or $last";
                return "$option must be $listed{$limit['note']}, got $shown";
        }
        return "$option has a limit of an unknown kind ({$limit['kind']}); this is a bug in drover/laravel";
    }

    /**
     * What is wrong with how a pool's processes cover its queues, or null, once each option is
     * within its own limit: a simple pool gives every queue one process at least, and an auto
     * pool's max_processes (its processes when unset) must hold min_processes for each queue.
     * The master's rule in its words (coverage_problem in the binary's src/config/pool_limits.rs).
     */
    public static function coverageProblem(string $balance, int $processes, int $min, int $max, int $queues): ?string
    {
        if ($balance === 'simple' && $processes < $queues) {
            return "balance simple splits processes between the queues; $processes processes cannot serve $queues queues (raise processes to at least $queues)";
        }
        if ($balance === 'auto' && $min * $queues > $max) {
            return "max_processes ($max) is below min_processes ($min) times the $queues queues (raise max_processes or lower min_processes)";
        }
        return null;
    }
}
