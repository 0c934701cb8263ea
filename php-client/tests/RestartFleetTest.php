<?php

namespace Drover\Tests;

use Drover\Console\RestartCommand;
use PHPUnit\Framework\TestCase;

/** When a fleet restart moves on to the next host: that host's status shows its reload done. */
final class RestartFleetTest extends TestCase
{
    private static function pool(int $generation, array $workerGenerations, int $serving, bool $retired = false): array
    {
        return [
            'name' => 'default', 'generation' => $generation, 'processes' => count($workerGenerations),
            'serving' => $serving, 'retired' => $retired,
            'workers' => array_map(fn ($g) => ['generation' => $g], $workerGenerations),
        ];
    }

    public function testAHostIsDoneWhenEveryWorkerIsOfItsPoolsNewGenerationAndServing(): void
    {
        $this->assertNull(RestartCommand::unreplaced(['pools' => [self::pool(2, [2, 2], 2)]]));
        $this->assertSame('pool default: 1 worker(s) of the previous generation', RestartCommand::unreplaced(['pools' => [self::pool(2, [2, 1], 2)]]));
        $this->assertSame('pool default: 1 of 2 workers serving', RestartCommand::unreplaced(['pools' => [self::pool(2, [2, 2], 1)]]));
        $this->assertNull(RestartCommand::unreplaced(['pools' => [self::pool(1, [0], 0, retired: true)]]), 'a retired pool only drains');
    }
}
