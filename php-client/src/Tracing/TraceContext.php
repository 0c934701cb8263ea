<?php

namespace Drover\Tracing;

/**
 * A W3C trace context (https://www.w3.org/TR/trace-context/): the `traceparent` of a span and
 * the `tracestate` that goes with it, as a job's payload carries them for the drover master,
 * which parents its `send {queue}` span on that span. Only a valid traceparent makes one
 * (fromTraceparent): version 00, a 32-digit trace id and a 16-digit parent span id in lowercase
 * hex, neither all zeros, and two hex digits of flags.
 */
final class TraceContext
{
    /** The payload key of the dispatching span's traceparent. */
    public const TRACEPARENT_KEY = 'traceparent';

    /** The payload key of its tracestate, present only when that is not empty. */
    public const TRACESTATE_KEY = 'tracestate';

    /** The payload key of the moment of dispatch (Unix seconds with microseconds), with traceparent. */
    public const SENT_AT_KEY = 'drover_sent_at';

    /** `00-{trace id}-{parent span id}-{flags}`; the ids are checked for zeros apart. */
    private const TRACEPARENT = '/\A00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}\z/';

    private function __construct(
        /** `00-<32 hex trace id>-<16 hex parent span id>-<2 hex flags>`, lowercase. */
        public readonly string $traceparent,
        /** The vendors' list (`vendor=value,...`), or null when there is none. */
        public readonly ?string $tracestate,
    ) {
    }

    /**
     * The context a traceparent names, or null when it is not a valid version-00 traceparent
     * (upper-case hex, other lengths or versions, an all-zero trace or span id). A tracestate
     * that is empty or not printable ASCII is dropped, as the W3C says a malformed one is,
     * and the traceparent kept.
     */
    public static function fromTraceparent(string $traceparent, ?string $tracestate = null): ?self
    {
        if (preg_match(self::TRACEPARENT, $traceparent, $ids) !== 1
            || $ids[1] === str_repeat('0', 32) || $ids[2] === str_repeat('0', 16)) {
            return null;
        }
        return new self($traceparent, self::usableTracestate($tracestate));
    }

    /** The tracestate trimmed, or null when it is empty or holds what no header can carry. */
    private static function usableTracestate(?string $tracestate): ?string
    {
        $tracestate = trim((string) $tracestate, " \t");
        return $tracestate === '' || preg_match('/\A[\x20-\x7e]+\z/', $tracestate) !== 1 ? null : $tracestate;
    }

    /**
     * The payload with this context and the moment of dispatch (`microtime(true)`) in it, under
     * the keys the drover master reads.
     *
     * @param array<string, mixed> $payload
     * @return array<string, mixed>
     */
    public function into(array $payload, float $sentAt): array
    {
        $payload[self::TRACEPARENT_KEY] = $this->traceparent;
        if ($this->tracestate !== null) {
            $payload[self::TRACESTATE_KEY] = $this->tracestate;
        }
        $payload[self::SENT_AT_KEY] = $sentAt;
        return $payload;
    }
}
