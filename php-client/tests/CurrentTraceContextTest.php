<?php

namespace Drover\Tests;

use Drover\Tracing\CurrentTraceContext;
use Illuminate\Container\Container;
use Illuminate\Events\Dispatcher;
use Illuminate\Foundation\Application;
use Illuminate\Log\Context\Repository as LaravelContext;
use OpenTelemetry\API\Trace\Span;
use OpenTelemetry\API\Trace\SpanContext;
use OpenTelemetry\API\Trace\TraceFlags;
use OpenTelemetry\API\Trace\TraceState;
use PHPUnit\Framework\TestCase;

/**
 * Where the trace context of a dispatch comes from: the OpenTelemetry API's current span, else
 * Laravel's Context, else nowhere.
 *
 * The real OpenTelemetry API package (open-telemetry/api) cannot be installed here (no
 * Packagist): tests/fixtures/opentelemetry-api.php, loaded by this test only (and by
 * TracePropagationTest), stands in for it with the API's own class and method names
 * (Span::getCurrent(), Span::wrap(), activate()/detach(), SpanContext::create(), TraceState).
 * Laravel's Context exists from Laravel 11: its tests are skipped on Laravel 8.
 */
final class CurrentTraceContextTest extends TestCase
{
    private const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';

    private const SPAN_ID = '00f067aa0ba902b7';

    public static function setUpBeforeClass(): void
    {
        require_once __DIR__ . '/fixtures/opentelemetry-api.php';
    }

    public function testNoSpanAndNoContextGiveNothing(): void
    {
        $resolver = new CurrentTraceContext(new Container());
        $this->assertNull($resolver->fromOpenTelemetry(), 'the invalid span the API gives without an active one');
        $this->assertNull($resolver->fromLaravelContext(), 'no Context bound');
        $this->assertNull($resolver->resolve());
    }

    public function testTheActiveOpenTelemetrySpanIsTheContext(): void
    {
        $scope = Span::wrap(SpanContext::create(self::TRACE_ID, self::SPAN_ID, TraceFlags::SAMPLED, new TraceState('rojo=00f067aa0ba902b7')))->activate();
        try {
            $context = (new CurrentTraceContext(new Container()))->resolve();
            $this->assertSame('00-' . self::TRACE_ID . '-' . self::SPAN_ID . '-01', $context->traceparent);
            $this->assertSame('rojo=00f067aa0ba902b7', $context->tracestate);
            // The innermost active span, its flags as they are (not sampled: 00), no tracestate.
            $inner = Span::wrap(SpanContext::create(self::TRACE_ID, 'b7ad6b7169203331'))->activate();
            try {
                $context = (new CurrentTraceContext(new Container()))->resolve();
                $this->assertSame('00-' . self::TRACE_ID . '-b7ad6b7169203331-00', $context->traceparent);
                $this->assertNull($context->tracestate);
            } finally {
                $inner->detach();
            }
        } finally {
            $scope->detach();
        }
        $this->assertNull((new CurrentTraceContext(new Container()))->resolve(), 'nothing once the span is detached');
    }

    public function testAnInvalidOpenTelemetrySpanGivesNothing(): void
    {
        foreach ([SpanContext::getInvalid(), SpanContext::create(str_repeat('0', 32), self::SPAN_ID)] as $invalid) {
            $scope = Span::wrap($invalid)->activate();
            try {
                $this->assertNull((new CurrentTraceContext(new Container()))->fromOpenTelemetry());
            } finally {
                $scope->detach();
            }
        }
    }

    public function testAHiddenTraceparentInLaravelsContextIsTheContextThenAPlainOne(): void
    {
        $context = $this->laravelContext();
        $container = new Container();
        $container->instance(LaravelContext::class, $context);
        $resolver = new CurrentTraceContext($container);
        $context->add('traceparent', '00-' . self::TRACE_ID . '-b7ad6b7169203331-01');
        $this->assertSame('00-' . self::TRACE_ID . '-b7ad6b7169203331-01', $resolver->resolve()->traceparent, 'a plain one');
        $this->assertNull($resolver->resolve()->tracestate);
        $context->addHidden('traceparent', '00-' . self::TRACE_ID . '-' . self::SPAN_ID . '-01');
        $context->addHidden('tracestate', 'congo=t61rcWkgMzE');
        $found = $resolver->resolve();
        $this->assertSame(['00-' . self::TRACE_ID . '-' . self::SPAN_ID . '-01', 'congo=t61rcWkgMzE'], [$found->traceparent, $found->tracestate], 'the hidden one first');
        // A hidden one that is not valid gives way to the plain one.
        $context->addHidden('traceparent', 'not a traceparent');
        $this->assertSame('00-' . self::TRACE_ID . '-b7ad6b7169203331-01', $resolver->resolve()->traceparent);
        $context->forget('traceparent');
        $this->assertNull($resolver->resolve());
        $context->add('traceparent', ['an' => 'array']);
        $this->assertNull($resolver->resolve(), 'a value that is not a string');
    }

    public function testTheOpenTelemetrySpanComesBeforeLaravelsContext(): void
    {
        $context = $this->laravelContext();
        $container = new Container();
        $container->instance(LaravelContext::class, $context);
        $context->addHidden('traceparent', '00-' . self::TRACE_ID . '-b7ad6b7169203331-01');
        $scope = Span::wrap(SpanContext::create(self::TRACE_ID, self::SPAN_ID, TraceFlags::SAMPLED))->activate();
        try {
            $this->assertSame('00-' . self::TRACE_ID . '-' . self::SPAN_ID . '-01', (new CurrentTraceContext($container))->resolve()->traceparent);
        } finally {
            $scope->detach();
        }
        $scope = Span::getInvalid()->activate();
        try {
            $this->assertSame('00-' . self::TRACE_ID . '-b7ad6b7169203331-01', (new CurrentTraceContext($container))->resolve()->traceparent, 'an invalid span gives way to the Context');
        } finally {
            $scope->detach();
        }
    }

    public function testWithoutAContainerTheApplicationsIsAsked(): void
    {
        $context = $this->laravelContext();
        $previous = Container::getInstance();
        $application = new Container();
        $application->instance(LaravelContext::class, $context);
        Container::setInstance($application);
        try {
            $context->addHidden('traceparent', '00-' . self::TRACE_ID . '-' . self::SPAN_ID . '-01');
            $this->assertSame('00-' . self::TRACE_ID . '-' . self::SPAN_ID . '-01', (new CurrentTraceContext())->resolve()->traceparent);
        } finally {
            Container::setInstance($previous);
        }
    }

    /** A fresh Laravel Context, or the test skipped on a Laravel without one. */
    private function laravelContext(): LaravelContext
    {
        if (!class_exists(LaravelContext::class)) {
            $this->markTestSkipped('Laravel ' . Application::VERSION . ' has no Context (Illuminate\Log\Context\Repository, Laravel 11+)');
        }
        return new LaravelContext(new Dispatcher());
    }
}
