<?php

namespace Drover\Tests;

use Drover\Config\InvalidConfig;
use Drover\Connectors\DroverConnector;
use Drover\DroverQueue;
use Illuminate\Config\Repository as Config;
use Illuminate\Container\Container;
use Illuminate\Database\Capsule\Manager as Capsule;
use Illuminate\Events\Dispatcher;
use Illuminate\Foundation\Application;
use Illuminate\Log\Context\Repository as LaravelContext;
use Illuminate\Queue\Queue;
use OpenTelemetry\API\Trace\Span;
use OpenTelemetry\API\Trace\SpanContext;
use OpenTelemetry\API\Trace\TraceFlags;
use OpenTelemetry\API\Trace\TraceState;
use PHPUnit\Framework\TestCase;

/**
 * A job dispatched on the drover connection inside a traced context carries that context in its
 * stored payload (drover.jobs, on a real PostgreSQL): `traceparent`, `tracestate` and
 * `drover_sent_at`, for the master's `send {queue}` span; one dispatched outside any carries
 * none, and neither does any with drover.traces.propagate off.
 *
 * The OpenTelemetry API package cannot be installed here (no Packagist): the active span is the
 * stand-in's of tests/fixtures/opentelemetry-api.php, which has the API's own class and method
 * names. Laravel's Context exists from Laravel 11: its test is skipped on Laravel 8.
 */
final class TracePropagationTest extends TestCase
{
    private const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

    private Capsule $capsule;

    private \Illuminate\Database\Connection $db;

    public static function setUpBeforeClass(): void
    {
        require_once __DIR__ . '/fixtures/opentelemetry-api.php';
    }

    protected function setUp(): void
    {
        $server = PostgresServer::get();
        $server->pdo()->exec('TRUNCATE drover.jobs');
        $this->capsule = new Capsule();
        $this->capsule->addConnection(['driver' => 'pgsql', 'host' => $server->socketDir(), 'database' => 'drover', 'username' => 'drover', 'password' => '', 'charset' => 'utf8', 'prefix' => '', 'schema' => 'public']);
        $this->db = $this->capsule->getConnection();
    }

    protected function tearDown(): void
    {
        Queue::createPayloadUsing(null);
    }

    public function testAJobDispatchedInsideASpanCarriesItsContextAndTheMomentOfDispatch(): void
    {
        $queue = $this->queue();
        $before = microtime(true);
        $id = $this->insideSpan(fn () => $queue->push('Job@handle', ['a' => 1], 'traced'), 'rojo=00f067aa0ba902b7');
        $after = microtime(true);
        $payload = $this->storedPayload($id);
        $this->assertSame(self::TRACEPARENT, $payload['traceparent']);
        $this->assertSame('rojo=00f067aa0ba902b7', $payload['tracestate']);
        $this->assertIsFloat($payload['drover_sent_at']);
        $this->assertGreaterThanOrEqual($before, $payload['drover_sent_at']);
        $this->assertLessThanOrEqual($after, $payload['drover_sent_at']);
        $this->assertSame(['a' => 1], $payload['data'], "Laravel's payload as it was");
        $id = $this->insideSpan(fn () => $queue->push('Job@handle'));
        $this->assertArrayNotHasKey('tracestate', $this->storedPayload($id), 'no tracestate without one');
    }

    public function testAJobDispatchedOutsideAnyContextCarriesNoKeys(): void
    {
        $payload = $this->storedPayload($this->queue()->push('Job@handle'));
        foreach (['traceparent', 'tracestate', 'drover_sent_at'] as $key) {
            $this->assertArrayNotHasKey($key, $payload);
        }
    }

    public function testLaterAndBulkStampEachPayload(): void
    {
        $queue = $this->queue();
        $this->insideSpan(function () use ($queue) {
            $queue->later(60, 'Job@handle', '', 'traced');
            $queue->bulk(['Job@handle', 'Job@handle'], '', 'traced');
        });
        $payloads = array_map(fn ($row) => json_decode($row->payload, true), $this->db->select("SELECT payload FROM drover.jobs WHERE queue = 'traced' ORDER BY id"));
        $this->assertCount(3, $payloads);
        foreach ($payloads as $payload) {
            $this->assertSame(self::TRACEPARENT, $payload['traceparent']);
            $this->assertIsFloat($payload['drover_sent_at']);
        }
    }

    public function testARetryPushesTheStoredPayloadWithoutStampingItAgain(): void
    {
        $queue = $this->queue();
        $stored = $this->db->selectOne('SELECT payload FROM drover.jobs WHERE id = ?', [$this->insideSpan(fn () => $queue->push('Job@handle'))])->payload;
        // queue:retry pushes a failed job's payload raw, here inside another span.
        $again = $this->insideSpan(fn () => $queue->pushRaw($stored), null, 'b7ad6b7169203331');
        $this->assertSame(json_decode($stored, true), $this->storedPayload($again));
        // A payload without a context stays without one.
        $bare = $this->db->selectOne('SELECT payload FROM drover.jobs WHERE id = ?', [$queue->push('Job@handle')])->payload;
        $this->assertArrayNotHasKey('traceparent', $this->storedPayload($this->insideSpan(fn () => $queue->pushRaw($bare))));
    }

    public function testATraceparentAPayloadHookSetIsKeptWithTheMomentAdded(): void
    {
        Queue::createPayloadUsing(fn () => ['traceparent' => '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01']);
        $payload = $this->storedPayload($this->insideSpan(fn () => $this->queue()->push('Job@handle')));
        $this->assertSame('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', $payload['traceparent']);
        $this->assertIsFloat($payload['drover_sent_at']);
    }

    public function testLaravelsContextIsCarriedWithoutOpenTelemetry(): void
    {
        if (!class_exists(LaravelContext::class)) {
            $this->markTestSkipped('Laravel ' . Application::VERSION . ' has no Context (Illuminate\Log\Context\Repository, Laravel 11+)');
        }
        $container = new Container();
        $context = new LaravelContext(new Dispatcher());
        $container->instance(LaravelContext::class, $context);
        $queue = $this->queue($container);
        $context->addHidden('traceparent', self::TRACEPARENT);
        $context->addHidden('tracestate', 'congo=t61rcWkgMzE');
        $payload = $this->storedPayload($queue->push('Job@handle'));
        $this->assertSame([self::TRACEPARENT, 'congo=t61rcWkgMzE'], [$payload['traceparent'], $payload['tracestate']]);
        $this->assertIsFloat($payload['drover_sent_at']);
        $context->forgetHidden('traceparent');
        $this->assertArrayNotHasKey('traceparent', $this->storedPayload($queue->push('Job@handle')));
    }

    public function testPropagationOffLeavesThePayloadWithoutKeys(): void
    {
        $queue = new DroverQueue($this->db, 'default', propagatesTraces: false);
        $queue->setContainer(new Container());
        $queue->setConnectionName('drover');
        $payload = $this->storedPayload($this->insideSpan(fn () => $queue->push('Job@handle')));
        $this->assertArrayNotHasKey('traceparent', $payload);
        $this->assertArrayNotHasKey('drover_sent_at', $payload);
    }

    public function testTheConnectorReadsTheSwitchFromConfig(): void
    {
        foreach ([[[], true], [['propagate' => true], true], [['propagate' => false], false], [['propagate' => 'false'], false]] as [$traces, $stamped]) {
            $queue = $this->connected(['drover' => ['traces' => $traces]]);
            $payload = $this->storedPayload($this->insideSpan(fn () => $queue->push('Job@handle')));
            $this->assertSame($stamped, isset($payload['traceparent']), json_encode($traces));
        }
        try {
            $this->connected(['drover' => ['traces' => ['propagate' => 'sometimes']]]);
            $this->fail('expected InvalidConfig');
        } catch (InvalidConfig $e) {
            $this->assertStringContainsString("drover.traces.propagate must be true or false, got 'sometimes'", $e->getMessage());
        }
    }

    /** The drover queue on the test database, as the tests of DroverQueue make it. */
    private function queue(?Container $container = null): DroverQueue
    {
        $queue = new DroverQueue($this->db, 'default');
        $queue->setContainer($container ?? new Container());
        $queue->setConnectionName('drover');
        return $queue;
    }

    /** The queue DroverConnector makes under `$config` (config() is the application's). */
    private function connected(array $config): DroverQueue
    {
        $previous = Container::getInstance();
        $application = new Container();
        $application->instance('config', new Config($config));
        Container::setInstance($application);
        try {
            $queue = (new DroverConnector($this->capsule->getDatabaseManager()))->connect(['connection' => 'default']);
        } finally {
            Container::setInstance($previous);
        }
        $queue->setContainer(new Container());
        $queue->setConnectionName('drover');
        return $queue;
    }

    /** What `$dispatch` returns, called while a span of TRACEPARENT's trace is active. */
    private function insideSpan(\Closure $dispatch, ?string $tracestate = null, string $spanId = '00f067aa0ba902b7'): mixed
    {
        $span = SpanContext::create('4bf92f3577b34da6a3ce929d0e0e4736', $spanId, TraceFlags::SAMPLED, $tracestate === null ? null : new TraceState($tracestate));
        $scope = Span::wrap($span)->activate();
        try {
            return $dispatch();
        } finally {
            $scope->detach();
        }
    }

    /** @return array<string, mixed> the payload of job `$id` as drover.jobs holds it */
    private function storedPayload(int $id): array
    {
        return json_decode($this->db->selectOne('SELECT payload FROM drover.jobs WHERE id = ?', [$id])->payload, true);
    }
}
