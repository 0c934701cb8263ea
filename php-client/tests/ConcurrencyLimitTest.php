<?php

namespace Drover\Tests;

use Drover\Middleware\LimitConcurrency;
use Drover\Queue\ConcurrencyLimit;
use Illuminate\Queue\Middleware\WithoutOverlapping;
use PHPUnit\Framework\TestCase;

/** The concurrency limit a job is enqueued under, read at dispatch, on both Laravels. */
final class ConcurrencyLimitTest extends TestCase
{
    public function testLimitConcurrencyNamesItsKeyAndMax(): void
    {
        $limit = ConcurrencyLimit::ofJob(new LimitedJob('t1', [new LimitConcurrency('tenant:1', 3)]));
        $this->assertSame(['tenant:1', 3], [$limit->key, $limit->max]);
        $this->assertSame(['droverConcurrency' => ['key' => 'tenant:1', 'max' => 3]], $limit->into([]));
    }

    public function testWithoutOverlappingIsALimitOfOneUnderLaravelsLockKey(): void
    {
        $job = new LimitedJob('t1', [new WithoutOverlapping('order-7')]);
        $limit = ConcurrencyLimit::ofJob($job);
        $this->assertSame([(new WithoutOverlapping('order-7'))->getLockKey($job), 1], [$limit->key, $limit->max]);
    }

    public function testALockKeyLongerThanABrokerKeyIsDigested(): void
    {
        $job = new LimitedJob('t1', [new WithoutOverlapping(str_repeat('k', 300))]);
        $key = ConcurrencyLimit::ofJob($job)->key;
        $this->assertSame('sha256:' . hash('sha256', (new WithoutOverlapping(str_repeat('k', 300)))->getLockKey($job)), $key);
    }

    public function testAJobWithoutOneHasNone(): void
    {
        $this->assertNull(ConcurrencyLimit::ofJob(new LimitedJob('t1', [])));
        $this->assertNull(ConcurrencyLimit::ofJob('a string job'));
        $this->assertNull(ConcurrencyLimit::ofJob(new LimitedJob('t1', [(new WithoutOverlapping('k'))->dontRelease()])), 'dontRelease is left to Laravel');
    }

    public function testTwoLimitsOnOneJobAreRefusedNamingBoth(): void
    {
        $this->expectExceptionMessage("names more than one concurrency limit: WithoutOverlapping 'laravel-queue-overlap:Drover\\Tests\\LimitedJob:a' (1), LimitConcurrency 'b' (2); drover enforces one per job for now");
        ConcurrencyLimit::ofJob(new LimitedJob('t1', [new WithoutOverlapping('a'), new LimitConcurrency('b', 2)]));
    }

    public function testBadKeysAndMaximaAreRefusedNamingTheRule(): void
    {
        foreach ([
            [fn () => new LimitConcurrency('', 1), 'the key of LimitConcurrency is empty'],
            [fn () => new LimitConcurrency(str_repeat('x', 256), 1), 'is 256 characters long; at most 255'],
            [fn () => new LimitConcurrency(1.5, 1), 'the key of LimitConcurrency is a float'],
            [fn () => new LimitConcurrency('k', 0), "LimitConcurrency of key 'k' allows 0 jobs at once"],
        ] as [$make, $message]) {
            try {
                $make();
                $this->fail("no error for: $message");
            } catch (\InvalidArgumentException $e) {
                $this->assertStringContainsString($message, $e->getMessage());
            }
        }
        $this->assertSame('42', (new LimitConcurrency(42))->key);
    }

    public function testARetriedPayloadKeepsItsLimitAndABrokenOneIsNamed(): void
    {
        $limit = ConcurrencyLimit::ofPayload('{"displayName":"App\\\\Jobs\\\\Sync","droverConcurrency":{"key":"t","max":2}}');
        $this->assertSame(['t', 2], [$limit->key, $limit->max]);
        $this->assertNull(ConcurrencyLimit::ofPayload('{"displayName":"x"}'));
        $this->expectExceptionMessage('the droverConcurrency of App\\Jobs\\Sync is not {"key": string, "max": int}');
        ConcurrencyLimit::ofPayload('{"displayName":"App\\\\Jobs\\\\Sync","droverConcurrency":{"key":7}}');
    }

    public function testAtRunTimeLimitConcurrencyLetsTheJobThrough(): void
    {
        $this->assertSame('ran', (new LimitConcurrency('k'))->handle('job', fn ($job) => 'ran'));
    }
}
