<?php

namespace Drover\Tests;

use Drover\Middleware\LimitConcurrency;
use Drover\Middleware\LimitRate;
use Drover\Queue\JobLimits;
use Illuminate\Cache\ArrayStore;
use Illuminate\Cache\RateLimiter;
use Illuminate\Cache\RateLimiting\Limit;
use Illuminate\Cache\Repository;
use Illuminate\Container\Container;
use Illuminate\Queue\Middleware\RateLimited;
use Illuminate\Queue\Middleware\WithoutOverlapping;
use PHPUnit\Framework\TestCase;

/** The limits a job is enqueued under, read at dispatch, on both Laravels. */
final class JobLimitsTest extends TestCase
{
    private RateLimiter $limiter;

    protected function setUp(): void
    {
        $container = new Container();
        Container::setInstance($container);
        $this->limiter = new RateLimiter(new Repository(new ArrayStore()));
        $container->instance(RateLimiter::class, $this->limiter);
    }

    protected function tearDown(): void
    {
        Container::setInstance(null);
    }

    public function testDroversOwnMiddlewareNamesKeysCapsAndWindows(): void
    {
        $limits = JobLimits::ofJob(new LimitedJob('t1', [new LimitConcurrency('tenant:1', 3), LimitRate::perMinute(60, 'api')]));
        $this->assertSame([['tenant:1', 3, 0], ['api@60s', 60, 60000]], $limits->limits);
        $this->assertSame(['droverLimits' => [['tenant:1', 3, 0], ['api@60s', 60, 60000]]], $limits->into([]));
        $this->assertSame(['{"tenant:1","api@60s"}', '{3,60}', '{0,60000}'], $limits->bindings());
    }

    public function testLaravelsMiddlewareCombinesWithDroversOnOneJob(): void
    {
        $this->limiter->for('api', fn ($job) => [Limit::perMinute(10)->by($job->tenant), Limit::perHour(100)->by($job->tenant)]);
        $job = new LimitedJob('t1', [new WithoutOverlapping('order-7'), new RateLimited('api'), new LimitConcurrency('t1', 2)]);
        $limits = JobLimits::ofJob($job)->limits;
        // Laravel's own counter keys (Laravel 12 tells two limits of one key apart by their
        // fallbackKey, Laravel 8 shares one counter), with the window.
        [$minute, $hour] = ($this->limiter->limiter('api'))($job);
        $this->assertSame([
            [(new WithoutOverlapping('order-7'))->getLockKey($job), 1, 0],
            // Laravel's windows with their margin: a twentieth, 250 ms to a second.
            [md5('api' . $minute->key) . '@60s', 10, 61000],
            [md5('api' . $hour->key) . '@3600s', 100, 3601000],
            ['t1', 2, 0],
        ], $limits);
    }

    public function testALockKeyLongerThanABrokerKeyIsDigested(): void
    {
        $job = new LimitedJob('t1', [new WithoutOverlapping(str_repeat('k', 300))]);
        $key = JobLimits::ofJob($job)->limits[0][0];
        $this->assertSame('sha256:' . hash('sha256', (new WithoutOverlapping(str_repeat('k', 300)))->getLockKey($job)), $key);
    }

    public function testAJobWithoutOneHasNone(): void
    {
        $this->assertNull(JobLimits::ofJob(new LimitedJob('t1', [])));
        $this->assertNull(JobLimits::ofJob('a string job'));
        $this->assertNull(JobLimits::ofJob(new LimitedJob('t1', [(new WithoutOverlapping('k'))->dontRelease()])), 'dontRelease is left to Laravel');
    }

    public function testTheSameKeyTwiceKeepsTheStricterAndNineLimitsAreRefused(): void
    {
        $limits = JobLimits::ofJob(new LimitedJob('t1', [new LimitConcurrency('k', 3), new LimitConcurrency('k', 2), new LimitRate('k', 5, 10)]))->limits;
        $this->assertSame([['k', 2, 0], ['k@10s', 5, 10000]], $limits);
        $this->assertSame([250, 500, 1000], [JobLimits::laravelMargin(1), JobLimits::laravelMargin(10), JobLimits::laravelMargin(60)]);
        $nine = array_map(fn ($i) => new LimitConcurrency("k$i", 1), range(1, 9));
        $this->expectExceptionMessage('Drover\Tests\LimitedJob names 9 limits; a job takes at most 8');
        JobLimits::ofJob(new LimitedJob('t1', $nine));
    }

    public function testARateOfZeroFromALaravelLimiterIsRefusedNamingTheJob(): void
    {
        $this->limiter->for('closed', fn () => Limit::perMinute(0));
        $this->expectExceptionMessage("the rate limit '" . md5('closed') . "@60s' of Drover\Tests\LimitedJob allows 0 jobs; give at least 1");
        JobLimits::ofJob(new LimitedJob('t1', [new RateLimited('closed')]));
    }

    public function testBadKeysMaximaAndWindowsAreRefusedNamingTheRule(): void
    {
        foreach ([
            [fn () => new LimitConcurrency('', 1), 'the key of LimitConcurrency is empty'],
            [fn () => new LimitConcurrency(str_repeat('x', 256), 1), 'is 256 characters long; at most 255'],
            [fn () => new LimitConcurrency(1.5, 1), 'the key of LimitConcurrency is a float'],
            [fn () => new LimitConcurrency('k', 0), "LimitConcurrency of key 'k' allows 0 jobs at once"],
            [fn () => LimitRate::perSecond(0, 'k'), "LimitRate of key 'k' allows 0 jobs per window"],
            [fn () => new LimitRate('k', 1, 0), "LimitRate of key 'k' has a window of 0 seconds; give 1 to 86400"],
            [fn () => new LimitRate(['k'], 1, 1), 'the key of LimitRate is a array'],
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

    public function testARetriedPayloadKeepsItsLimitsAndABrokenOneIsNamed(): void
    {
        $limits = JobLimits::ofPayload('{"displayName":"App\\\\Jobs\\\\Sync","droverLimits":[["t",2,0],["api@1s",5,1000]]}');
        $this->assertSame([['t', 2, 0], ['api@1s', 5, 1000]], $limits->limits);
        $this->assertNull(JobLimits::ofPayload('{"displayName":"x"}'));
        $this->expectExceptionMessage('the droverLimits of App\Jobs\Sync is not a list of [key, cap, window milliseconds]');
        JobLimits::ofPayload('{"displayName":"App\\\\Jobs\\\\Sync","droverLimits":[["t","2",0]]}');
    }

    public function testAtRunTimeDroversMiddlewareLetsTheJobThrough(): void
    {
        $this->assertSame('ran', (new LimitConcurrency('k'))->handle('job', fn ($job) => 'ran'));
        $this->assertSame('ran', LimitRate::perDay(1, 'k')->handle('job', fn ($job) => 'ran'));
    }
}
