<?php

namespace Drover\Tests;

use Drover\Worker\LaravelWorker;
use PHPUnit\Framework\TestCase;

/** A payload the worker cannot run is named, with why, before anything of Laravel's reads it. */
final class UnreadablePayloadTest extends TestCase
{
    public function testLaravelsPayloadIsReadable(): void
    {
        $this->assertNull(LaravelWorker::unreadablePayload('{"job":"Illuminate\\\\Queue\\\\CallQueuedHandler@call","data":{}}'));
    }

    public function testJsonNestedPastTheDepthLimitIsNamed(): void
    {
        $deep = '{"job":"x","data":' . str_repeat('[', 10000) . str_repeat(']', 10000) . '}';
        $this->assertStringContainsString('not JSON this worker can read (Maximum stack depth exceeded)', (string) LaravelWorker::unreadablePayload($deep));
    }

    public function testALoneSurrogateIsNamed(): void
    {
        $this->assertStringContainsString('Single unpaired UTF-16 surrogate', (string) LaravelWorker::unreadablePayload('{"job":"x\\udc80","data":{}}'));
    }

    public function testJsonThatIsNoJobObjectIsNamed(): void
    {
        foreach (['42', '"text"', '[1,2]', 'null', '{}'] as $raw) {
            $this->assertStringContainsString('JSON but not an object', (string) LaravelWorker::unreadablePayload($raw), $raw);
        }
        $this->assertStringContainsString('not JSON this worker can read', (string) LaravelWorker::unreadablePayload('{"job":'));
    }
}
