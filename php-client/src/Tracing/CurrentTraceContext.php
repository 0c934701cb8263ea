<?php

namespace Drover\Tracing;

use Illuminate\Container\Container;
use Illuminate\Contracts\Container\Container as ContainerContract;
use Illuminate\Log\Context\Repository as LaravelContext;
use OpenTelemetry\API\Trace\Span as OpenTelemetrySpan;

/**
 * The trace context a job is dispatched in, for its payload: the drover master parents the
 * job's `send {queue}` span (and so its run) on the span that dispatched it.
 *
 * Sources, in order; the first that gives a valid W3C context (TraceContext::fromTraceparent)
 * wins:
 *  1. the OpenTelemetry API's current span (`OpenTelemetry\API\Trace\Span::getCurrent()`), when
 *     the application has the open-telemetry/api package: its trace id, span id, flags and
 *     tracestate. An invalid span (none active) gives nothing;
 *  2. Laravel's Context (Laravel 11+, `Illuminate\Support\Facades\Context`): a `traceparent`
 *     (and `tracestate`) the application keeps there, hidden (Context::addHidden) or not — e.g.
 *     a middleware copying the request's headers;
 *  3. otherwise none: PHP starts no trace of its own, and the job's payload gets no keys.
 * Each source is looked for only where its classes exist, so neither is needed.
 *
 * DroverQueue writes what this finds into each new payload (TraceContext::into), under the
 * keys the master reads: `traceparent`, `tracestate` (only when not empty) and
 * `drover_sent_at`, the moment of dispatch as Unix seconds with microseconds. Turned off by
 * drover.traces.propagate = false.
 */
final class CurrentTraceContext
{
    public function __construct(
        /** Where Laravel's Context is bound; null: the application's (Container::getInstance()). */
        private readonly ?ContainerContract $container = null,
    ) {
    }

    /** The context of the dispatch, or null when there is none. */
    public function resolve(): ?TraceContext
    {
        return $this->fromOpenTelemetry() ?? $this->fromLaravelContext();
    }

    /** The OpenTelemetry API's current span, when the API is installed and a span is active. */
    public function fromOpenTelemetry(): ?TraceContext
    {
        if (!class_exists(OpenTelemetrySpan::class)) {
            return null;
        }
        $spanContext = OpenTelemetrySpan::getCurrent()->getContext();
        if (!$spanContext->isValid()) {
            return null;
        }
        $traceparent = sprintf('00-%s-%s-%02x', strtolower($spanContext->getTraceId()), strtolower($spanContext->getSpanId()), $spanContext->getTraceFlags() & 0xff);
        $tracestate = $spanContext->getTraceState();
        return TraceContext::fromTraceparent($traceparent, $tracestate === null ? null : (string) $tracestate);
    }

    /**
     * The `traceparent` (and `tracestate`) kept in Laravel's Context, hidden before plain; null
     * on a Laravel without Context (before 11) or where it is not bound.
     */
    public function fromLaravelContext(): ?TraceContext
    {
        if (!class_exists(LaravelContext::class)) {
            return null;
        }
        $container = $this->container ?? Container::getInstance();
        if (!$container->bound(LaravelContext::class)) {
            return null;
        }
        $context = $container->make(LaravelContext::class);
        return self::fromValues($context->getHidden(TraceContext::TRACEPARENT_KEY), $context->getHidden(TraceContext::TRACESTATE_KEY))
            ?? self::fromValues($context->get(TraceContext::TRACEPARENT_KEY), $context->get(TraceContext::TRACESTATE_KEY));
    }

    /** A context from values kept by the application, which may be anything. */
    private static function fromValues(mixed $traceparent, mixed $tracestate): ?TraceContext
    {
        return is_string($traceparent)
            ? TraceContext::fromTraceparent($traceparent, is_string($tracestate) ? $tracestate : null)
            : null;
    }
}
