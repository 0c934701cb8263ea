<?php

namespace Drover\Console;

use Drover\Control\NotRunning;

/** `php artisan drover:status`: pools and workers of the running master. Exit 0 running, 1 paused, 2 not running. */
class StatusCommand extends ControlCommand
{
    protected $signature = 'drover:status {--json : Print the master\'s answer as JSON}';

    protected $description = 'Show the drover master\'s pools and workers';

    public function handle(): int
    {
        try {
            $status = $this->client()->send('status');
        } catch (NotRunning $e) {
            $this->error($e->getMessage());
            return 2;
        }
        if ($this->option('json')) {
            $this->line(json_encode($status, JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES));
        } else {
            $this->line(sprintf('drover master pid %d: %s%s', $status['pid'], $status['phase'], $status['paused'] ? ', paused' : ''));
            foreach ($status['pools'] as $pool) {
                $this->line(sprintf('pool %s (queues %s)', $pool['name'], implode(',', $pool['queues'])));
                $rows = array_map(fn ($w) => [$w['id'], $w['pid'], $w['state'], $w['held'], $w['running'] ?? '-', $w['finished'], $w['uptime_secs'] . 's'], $pool['workers']);
                $this->table(['worker', 'pid', 'state', 'held', 'running', 'finished', 'uptime'], $rows);
            }
            $t = $status['totals'];
            $this->line(sprintf('totals: %d claimed, %d done, %d released, %d failed, %d timed out', $t['claimed'], $t['done'], $t['released'], $t['failed'], $t['timed_out']));
        }
        return $status['paused'] ? 1 : 0;
    }
}
