<?php

namespace Drover\Dashboard;

/**
 * drover.metrics' distributions ({"n","sum","max","p50","p95","buckets":[[upper,n],...]}) merged
 * across rows: counts per bucket added, percentiles read back from the merged buckets (within a
 * bucket's width, an eighth of its value; docs/metrics.md).
 */
final class Distribution
{
    /** @var array<string, int> upper bound (as a string key) => count */
    private array $buckets = [];

    private int $n = 0;

    private float $sum = 0.0;

    private float $max = 0.0;

    /** @param array<string, mixed> $stored */
    public function add(array $stored): void
    {
        $this->n += (int) ($stored['n'] ?? 0);
        $this->sum += (float) ($stored['sum'] ?? 0);
        $this->max = max($this->max, (float) ($stored['max'] ?? 0));
        foreach (($stored['buckets'] ?? []) as $bucket) {
            if (is_array($bucket) && count($bucket) === 2) {
                $key = (string) (float) $bucket[0];
                $this->buckets[$key] = ($this->buckets[$key] ?? 0) + (int) $bucket[1];
            }
        }
    }

    public function count(): int
    {
        return $this->n;
    }

    public function mean(): ?float
    {
        return $this->n > 0 ? $this->sum / $this->n : null;
    }

    public function max(): ?float
    {
        return $this->n > 0 ? $this->max : null;
    }

    /** The upper bound of the bucket where the count reaches $q of all (never above the max). */
    public function quantile(float $q): ?float
    {
        if ($this->n === 0 || $this->buckets === []) {
            return null;
        }
        $uppers = array_map('floatval', array_keys($this->buckets));
        $counts = array_values($this->buckets);
        array_multisort($uppers, SORT_ASC, $counts);
        $rank = max(1, (int) ceil($q * array_sum($counts)));
        $seen = 0;
        foreach ($uppers as $i => $upper) {
            $seen += $counts[$i];
            if ($seen >= $rank) {
                return min($upper, $this->max);
            }
        }
        return $this->max;
    }
}
