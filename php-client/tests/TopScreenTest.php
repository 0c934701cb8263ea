<?php

namespace Drover\Tests;

use Drover\Console\TopScreen;
use PHPUnit\Framework\TestCase;

/** One frame of `drover:top` from what the repositories read: masters, pools, workers, queues, keys. */
final class TopScreenTest extends TestCase
{
    public function testAFrameShowsEveryMasterPoolWorkerQueueAndBusyKey(): void
    {
        $node = (object) ['id' => 1, 'hostname' => 'web-1', 'pid' => 42, 'silent_secs' => 1.2, 'status' => [
            'health' => 'serving', 'master_pss_kib' => 3000,
            'pools' => [['name' => 'default', 'queues' => ['high', 'default'], 'serving' => 2, 'processes' => 2,
                'circuit' => ['state' => 'closed'], 'restarts' => 0, 'paused' => true,
                'workers' => [['pid' => 100, 'state' => 'busy', 'running' => 7, 'finished' => 3, 'pss_kib' => 14000], ['pid' => 101, 'state' => 'idle', 'finished' => 0]]]],
        ]];
        $queues = [(object) ['queue' => 'default', 'pending' => 10000, 'delayed' => 2, 'running' => 1, 'oldest_wait' => 3.25]];
        $throughput = ['default' => (object) ['per_minute' => 12.5, 'failed' => 1]];
        $keys = [(object) ['key' => 'api:stripe', 'waiting' => 3, 'held' => 2]];
        $text = implode("\n", TopScreen::lines([$node], $queues, $throughput, $keys, 10000, 'now'));
        foreach ([
            'web-1  node 1  pid 42  serving  seen 1 s ago  master 2.9 MiB',
            'pool default [high, default]  2/2 serving  circuit closed  restarts 0  PAUSED',
            'worker 100     busy      #7         done 3      13.7 MiB',
            'worker 101     idle',
            '10,000+',
            '3.2 s',
            '12.5',
            'api:stripe',
        ] as $part) {
            $this->assertStringContainsString($part, $text);
        }
        $this->assertStringContainsString('none: no master', implode("\n", TopScreen::lines([], [], [], [], 10000, 'now')));
    }
}
