<?php

namespace Drover\Tests;

use Drover\Queue\LaravelLimits;
use Illuminate\Bus\Queueable;
use Illuminate\Cache\ArrayStore;
use Illuminate\Cache\RateLimiter;
use Illuminate\Cache\RateLimiting\Limit;
use Illuminate\Cache\Repository;
use Illuminate\Container\Container;
use Illuminate\Queue\Middleware\RateLimited;
use Illuminate\Queue\Middleware\RateLimitedWithRedis;
use Illuminate\Queue\Middleware\WithoutOverlapping;
use PHPUnit\Framework\TestCase;

/** A job whose middleware() answers what the test gives it, with `through()` beside it. */
final class LimitedJob
{
    use Queueable;

    /** A group, for the tests that give one: declared as Laravel 12's Queueable declares it. */
    public $messageGroup;

    /** @param list<object> $fromMethod */
    public function __construct(public string $tenant, private array $fromMethod = [])
    {
    }

    public function middleware(): array
    {
        return $this->fromMethod;
    }
}

/** Counts its own way: drover leaves it to Laravel. */
final class CountsItsOwnWay extends RateLimited
{
    protected function handleJob($job, $next, array $limits)
    {
        return $next($job);
    }
}

/** The limits drover reads from a job's Laravel middleware at dispatch, on both Laravels. */
final class LaravelLimitsTest extends TestCase
{
    private RateLimiter $limiter;

    protected function setUp(): void
    {
        $container = new Container();
        Container::setInstance($container);
        $this->limiter = new RateLimiter(new Repository(new ArrayStore()));
        $container->instance(RateLimiter::class, $this->limiter);
        // RateLimitedWithRedis resolves Redis when it is made (Laravel 8); it is never asked.
        $container->instance(\Illuminate\Contracts\Redis\Factory::class, new class () implements \Illuminate\Contracts\Redis\Factory {
            public function connection($name = null)
            {
                throw new \LogicException('not used');
            }
        });
    }

    protected function tearDown(): void
    {
        Container::setInstance(null);
    }

    public function testWithoutOverlappingIsASlotOfOneUnderTheKeyLaravelsLockTakes(): void
    {
        $overlap = new WithoutOverlapping('order-7');
        $job = new LimitedJob('t1', [$overlap]);
        $limits = LaravelLimits::ofJob($job);
        $this->assertSame([[
            'kind' => 'slots',
            'key' => 'laravel-queue-overlap:' . LimitedJob::class . ':order-7',
            'cap' => 1,
            'window_secs' => 0,
            'from' => WithoutOverlapping::class,
        ]], $limits->limits);
        $this->assertSame($overlap->getLockKey($job), $limits->limits[0]['key']);
        $this->assertSame([], $limits->leftToLaravel);
    }

    public function testMiddlewareGivenThroughThroughCountsBesideTheMethods(): void
    {
        $job = new LimitedJob('t1', [new WithoutOverlapping('a')]);
        $job->through([(new WithoutOverlapping('b'))->releaseAfter(5)]);
        $keys = array_column(LaravelLimits::ofJob($job)->limits, 'key');
        $this->assertSame([
            'laravel-queue-overlap:' . LimitedJob::class . ':a',
            'laravel-queue-overlap:' . LimitedJob::class . ':b',
        ], $keys);
    }

    public function testEachLimitOfARateLimitedLimiterIsARateUnderLaravelsOwnCounterKey(): void
    {
        $this->limiter->for('api', fn ($job) => [
            Limit::perMinute(10)->by($job->tenant),
            Limit::perHour(100),
        ]);
        $limits = LaravelLimits::ofJob(new LimitedJob('t1', [new RateLimited('api')]));
        $this->assertSame([
            ['kind' => 'rate', 'key' => md5('apit1'), 'cap' => 10, 'window_secs' => 60, 'from' => RateLimited::class],
            ['kind' => 'rate', 'key' => md5('api'), 'cap' => 100, 'window_secs' => 3600, 'from' => RateLimited::class],
        ], $limits->limits);
    }

    public function testALimiterPerSecondKeepsItsSecondsWhereLaravelHasThem(): void
    {
        if (!method_exists(Limit::class, 'perSecond')) {
            // Laravel 8 counts decay in minutes: its shortest window is a minute.
            $this->limiter->for('one', fn () => new Limit('', 3, 2));
            $limits = LaravelLimits::ofJob(new LimitedJob('t1', [new RateLimited('one')]));
            $this->assertSame(120, $limits->limits[0]['window_secs']);
            return;
        }
        $this->limiter->for('one', fn () => Limit::perSecond(3));
        $limits = LaravelLimits::ofJob(new LimitedJob('t1', [new RateLimited('one')]));
        $this->assertSame(3, $limits->limits[0]['cap']);
        $this->assertSame(1, $limits->limits[0]['window_secs']);
    }

    public function testNoLimiterLimitNoneAndAnEmptyAnswerLimitNothingAsInLaravel(): void
    {
        $this->limiter->for('none', fn () => Limit::none());
        $this->limiter->for('empty', fn () => null);
        $job = new LimitedJob('t1', [new RateLimited('undefined'), new RateLimited('none'), new RateLimited('empty')]);
        $limits = LaravelLimits::ofJob($job);
        $this->assertSame([], $limits->limits);
        $this->assertSame([], $limits->leftToLaravel);
    }

    public function testDontReleaseAndSubclassesThatCountTheirOwnWayAreLeftToLaravelWithTheReason(): void
    {
        $this->limiter->for('api', fn () => Limit::perMinute(1));
        $job = new LimitedJob('t1', [
            (new WithoutOverlapping('k'))->dontRelease(),
            (new RateLimited('api'))->dontRelease(),
            new RateLimitedWithRedis('api'),
            new CountsItsOwnWay('api'),
        ]);
        $limits = LaravelLimits::ofJob($job);
        $this->assertSame([], $limits->limits);
        $this->assertCount(4, $limits->leftToLaravel);
        $this->assertStringContainsString('dontRelease()', $limits->leftToLaravel[0]);
        $this->assertStringContainsString('dontRelease()', $limits->leftToLaravel[1]);
        $this->assertStringStartsWith(RateLimitedWithRedis::class . ':', $limits->leftToLaravel[2]);
        $this->assertStringStartsWith(CountsItsOwnWay::class . ':', $limits->leftToLaravel[3]);
    }

    public function testALimiterAnsweringSomethingElseThanLimitsIsLeftToLaravel(): void
    {
        $this->limiter->for('odd', fn () => ['not a limit']);
        $limits = LaravelLimits::ofJob(new LimitedJob('t1', [new RateLimited('odd')]));
        $this->assertSame([], $limits->limits);
        $this->assertStringContainsString('other than Limit objects', $limits->leftToLaravel[0]);
    }

    public function testAJobWithoutMiddlewareOrNotAnObjectHasNoLimits(): void
    {
        $this->assertSame([], LaravelLimits::ofJob(new \stdClass())->limits);
        $this->assertSame([], LaravelLimits::ofJob('App\\Jobs\\Plain')->limits);
    }
}
