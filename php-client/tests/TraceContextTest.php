<?php

namespace Drover\Tests;

use Drover\Tracing\TraceContext;
use PHPUnit\Framework\TestCase;

/** The W3C traceparent a payload may carry: only a valid version-00 one is taken. */
final class TraceContextTest extends TestCase
{
    private const TRACEPARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

    public function testAValidTraceparentIsTakenWithItsTracestate(): void
    {
        $context = TraceContext::fromTraceparent(self::TRACEPARENT, 'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE');
        $this->assertSame(self::TRACEPARENT, $context->traceparent);
        $this->assertSame('rojo=00f067aa0ba902b7,congo=t61rcWkgMzE', $context->tracestate);
        $this->assertSame(self::TRACEPARENT, TraceContext::fromTraceparent(self::TRACEPARENT)->traceparent);
        $unsampled = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00';
        $this->assertSame($unsampled, TraceContext::fromTraceparent($unsampled)->traceparent);
    }

    /** @return array<string, array{string}> */
    public static function invalidTraceparents(): array
    {
        return [
            'upper-case trace id' => ['00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01'],
            'upper-case span id' => ['00-4bf92f3577b34da6a3ce929d0e0e4736-00F067AA0BA902B7-01'],
            'upper-case flags' => ['00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0A'],
            'all-zero trace id' => ['00-00000000000000000000000000000000-00f067aa0ba902b7-01'],
            'all-zero span id' => ['00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01'],
            'version 01' => ['01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'],
            'version ff' => ['ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'],
            'short trace id' => ['00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01'],
            'long trace id' => ['00-4bf92f3577b34da6a3ce929d0e0e47361-00f067aa0ba902b7-01'],
            'short span id' => ['00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-01'],
            'long span id' => ['00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b70-01'],
            'one-digit flags' => ['00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1'],
            'three-digit flags' => ['00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-001'],
            'a field more' => ['00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-00'],
            'not hex' => ['00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01'],
            'a trailing newline' => [self::TRACEPARENT . "\n"],
            'spaces around' => [' ' . self::TRACEPARENT . ' '],
            'empty' => [''],
        ];
    }

    /** @dataProvider invalidTraceparents */
    public function testAnInvalidTraceparentGivesNoContext(string $traceparent): void
    {
        $this->assertNull(TraceContext::fromTraceparent($traceparent, 'rojo=00f067aa0ba902b7'));
    }

    public function testAnEmptyOrUnprintableTracestateIsDroppedAndTheTraceparentKept(): void
    {
        foreach (['', '  ', "rojo=1\ncongo=2", "rojo=\x00"] as $tracestate) {
            $context = TraceContext::fromTraceparent(self::TRACEPARENT, $tracestate);
            $this->assertSame(self::TRACEPARENT, $context->traceparent);
            $this->assertNull($context->tracestate, json_encode($tracestate));
        }
    }

    public function testIntoAPayloadWritesTheKeysTheMasterReads(): void
    {
        $payload = TraceContext::fromTraceparent(self::TRACEPARENT, 'rojo=1')->into(['uuid' => 'u'], 1722945600.123456);
        $this->assertSame(['uuid' => 'u', 'traceparent' => self::TRACEPARENT, 'tracestate' => 'rojo=1', 'drover_sent_at' => 1722945600.123456], $payload);
        $payload = TraceContext::fromTraceparent(self::TRACEPARENT)->into([], 1722945600.5);
        $this->assertSame(['traceparent' => self::TRACEPARENT, 'drover_sent_at' => 1722945600.5], $payload, 'no tracestate key without one');
    }
}
