<?php

namespace Drover\Console;

/**
 * One frame of `drover:top`: every master with its pools and workers, every queue with its
 * counts and last hour, the busiest limit keys — as plain lines for a terminal. Pure: it is
 * given what the repositories read.
 */
final class TopScreen
{
    /**
     * @param list<object> $nodes NodeRepository::nodes()
     * @param list<object> $queues QueueRepository::queues() (queue, pending, delayed, running, oldest_wait)
     * @param array<string, object> $throughput MetricsRepository::throughput('queue'), by queue
     * @param list<object> $keys LimitRepository::keys() (key, waiting, held)
     * @param int $cap the count each queue was counted to (its pending shows "N+" there)
     * @return list<string>
     */
    public static function lines(array $nodes, array $queues, array $throughput, array $keys, int $cap, string $now): array
    {
        $lines = ["drover top — $now (Ctrl-C ends)", '', 'MASTERS'];
        if ($nodes === []) {
            $lines[] = '  none: no master has a row in drover.nodes';
        }
        foreach ($nodes as $node) {
            $status = is_array($node->status ?? null) ? $node->status : [];
            $pss = isset($status['master_pss_kib']) ? sprintf('  master %.1f MiB', $status['master_pss_kib'] / 1024) : '';
            $lines[] = sprintf('  %s  node %d  pid %d  %s  seen %.0f s ago%s', $node->hostname, $node->id, $node->pid, $status['health'] ?? 'unknown', (float) $node->silent_secs, $pss);
            foreach ($status['pools'] ?? [] as $pool) {
                $lines[] = sprintf(
                    '    pool %s [%s]  %d/%d serving  circuit %s  restarts %d%s',
                    $pool['name'] ?? '?',
                    implode(', ', $pool['queues'] ?? []),
                    $pool['serving'] ?? 0,
                    $pool['processes'] ?? 0,
                    $pool['circuit']['state'] ?? '?',
                    $pool['restarts'] ?? 0,
                    ($pool['paused'] ?? false) ? '  PAUSED' : '',
                );
                foreach ($pool['workers'] ?? [] as $w) {
                    $lines[] = sprintf(
                        '      worker %-7s %-9s %-10s done %-6d %s',
                        $w['pid'] ?? '?',
                        $w['state'] ?? '?',
                        isset($w['running']) ? '#' . $w['running'] : '',
                        $w['finished'] ?? 0,
                        isset($w['pss_kib']) ? sprintf('%.1f MiB', $w['pss_kib'] / 1024) : '',
                    );
                }
            }
        }
        $lines[] = '';
        $lines[] = sprintf('%-28s %9s %9s %9s %12s %9s %9s', 'QUEUES', 'pending', 'delayed', 'running', 'oldest wait', 'jobs/min', 'failed');
        foreach ($queues as $q) {
            $t = $throughput[$q->queue] ?? null;
            $many = fn ($n) => (int) $n >= $cap ? number_format($cap) . '+' : number_format((int) $n);
            $lines[] = sprintf(
                '  %-26s %9s %9s %9s %10.1f s %9s %9s',
                mb_strimwidth((string) $q->queue, 0, 26, '…'),
                $many($q->pending),
                $many($q->delayed),
                number_format((int) $q->running),
                (float) $q->oldest_wait,
                $t ? number_format((float) $t->per_minute, 1) : '–',
                $t ? (string) $t->failed : '–',
            );
        }
        if ($keys !== []) {
            $lines[] = '';
            $lines[] = sprintf('%-40s %9s %9s', 'BUSIEST LIMIT KEYS', 'waiting', 'held');
            foreach (array_slice($keys, 0, 10) as $k) {
                $lines[] = sprintf('  %-38s %9d %9d', mb_strimwidth((string) $k->key, 0, 38, '…'), $k->waiting, $k->held);
            }
        }
        return $lines;
    }
}
