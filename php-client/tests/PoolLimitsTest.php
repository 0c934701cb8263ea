<?php

namespace Drover\Tests;

use Drover\Config\MasterPoolOptions;
use Drover\Config\PoolLimits;
use Drover\Config\Pools;
use PHPUnit\Framework\TestCase;

/**
 * config/drover.php's pool options are checked by the master's limits in the master's words: the
 * fixture is written by the binary's tests (src/config/php_pool_options.rs) from its own table and
 * its own messages, so a limit or a word that changes on one side and not the other fails here.
 */
final class PoolLimitsTest extends TestCase
{
    /** @return array{options: list<array{option: string, value: mixed, problem: ?string}>, coverage: list<array<string, mixed>>} */
    private static function fixture(): array
    {
        $text = file_get_contents(__DIR__ . '/fixtures/pool_limits.json');
        self::assertIsString($text);
        return json_decode($text, true, 512, JSON_THROW_ON_ERROR);
    }

    public function testEachCaseIsSaidInTheMastersWords(): void
    {
        $cases = self::fixture()['options'];
        self::assertGreaterThan(10, count($cases));
        foreach ($cases as $case) {
            $limit = MasterPoolOptions::LIMITS[$case['option']];
            self::assertSame(
                $case['problem'],
                PoolLimits::problem($case['option'], $limit, $case['value']),
                "{$case['option']} = " . json_encode($case['value'])
            );
        }
    }

    public function testHowProcessesCoverQueuesIsJudgedAndSaidAsTheMasterDoes(): void
    {
        $cases = self::fixture()['coverage'];
        self::assertGreaterThan(4, count($cases));
        self::assertNotSame([], array_filter($cases, fn ($c) => $c['problem'] !== null), 'the fixture has refusals');
        foreach ($cases as $case) {
            self::assertSame(
                $case['problem'],
                PoolLimits::coverageProblem($case['balance'], $case['processes'], $case['min_processes'], $case['max_processes'], $case['queues']),
                json_encode($case)
            );
        }
    }

    public function testEveryOptionWithALimitIsAPoolOptionWithADefault(): void
    {
        foreach (array_keys(MasterPoolOptions::LIMITS) as $option) {
            self::assertArrayHasKey($option, Pools::POOL_DEFAULTS);
            self::assertNull(
                PoolLimits::problem($option, MasterPoolOptions::LIMITS[$option], Pools::POOL_DEFAULTS[$option]),
                "the package's default for $option is within the master's limit"
            );
        }
    }

    public function testANumberFromEnvIsReadAsItsNumber(): void
    {
        self::assertNull(PoolLimits::problem('processes', MasterPoolOptions::LIMITS['processes'], '4'));
        self::assertNull(PoolLimits::problem('balance_cooldown', MasterPoolOptions::LIMITS['balance_cooldown'], '2.5'));
        self::assertSame(
            'processes must be a whole number from 1 to 4096, got four',
            PoolLimits::problem('processes', MasterPoolOptions::LIMITS['processes'], 'four')
        );
    }
}
