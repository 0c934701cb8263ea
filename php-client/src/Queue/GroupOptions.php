<?php

namespace Drover\Queue;

/**
 * What a job asks of its group and deduplication, read the way Laravel's SQS driver reads them
 * (`Illuminate\Queue\SqsQueue::getQueueableOptions`), on any queue:
 *
 * - the group: the job's `$messageGroup` (Laravel 12's `onGroup()`, a queued listener's
 *   `messageGroup`) or its `messageGroup()` method;
 * - the deduplication id: the job's `$deduplicator` callable (`withDeduplicator()`) or its
 *   `deduplicationId($payload, $queue)` method; none means the job is not deduplicated;
 * - `hold`: the job's `$holdGroupOnFailure` property or `holdGroupOnFailure()` method, else
 *   whether its queue is listed in `drover.groups.hold`.
 *
 * On Laravel 8, which has neither `onGroup()` nor deduplicators, the same properties and methods
 * work on any job. A group or deduplication id must be a non-empty string, an int or a backed enum
 * of at most 128 characters (the limit of SQS FIFO); anything else is refused at dispatch,
 * naming the job.
 */
final class GroupOptions
{
    /** The longest group or deduplication id, as SQS FIFO's. */
    public const MAX_ID_LENGTH = 128;

    /** The payload keys a grouped job carries, so that a retry (pushRaw) keeps its group. */
    public const PAYLOAD_GROUP = 'messageGroup';
    public const PAYLOAD_HOLD = 'holdGroupOnFailure';

    private function __construct(
        /** The group, or null for an ungrouped job. */
        public readonly ?string $group,
        /** Whether the job's failure for good stops its group until it is retried or forgotten. */
        public readonly bool $hold,
    ) {
    }

    /** An ungrouped job. */
    public static function none(): self
    {
        return new self(null, false);
    }

    /**
     * @param list<string> $holdQueues queues whose groups hold on a failure (drover.groups.hold)
     */
    public static function ofJob(mixed $job, string $queue, array $holdQueues): self
    {
        if (!is_object($job)) {
            return self::none();
        }
        $group = $job->messageGroup ?? (method_exists($job, 'messageGroup') ? $job->messageGroup() : null);
        if ($group === null) {
            return self::none();
        }
        $group = self::id($group, 'message group', $job);
        $hold = $job->holdGroupOnFailure
            ?? (method_exists($job, 'holdGroupOnFailure') ? $job->holdGroupOnFailure() : null)
            ?? in_array($queue, $holdQueues, true);
        return new self($group, (bool) $hold);
    }

    /** The group a payload carries (a retried or raw job). */
    public static function ofPayload(string $payload): self
    {
        if (!str_contains($payload, '"' . self::PAYLOAD_GROUP . '"')) {
            return self::none();
        }
        $decoded = json_decode($payload, true);
        if (!is_array($decoded) || !isset($decoded[self::PAYLOAD_GROUP])) {
            return self::none();
        }
        $group = self::id($decoded[self::PAYLOAD_GROUP], 'message group', $decoded['displayName'] ?? 'a raw payload');
        return new self($group, (bool) ($decoded[self::PAYLOAD_HOLD] ?? false));
    }

    /** The job's deduplication id for this payload, or null when it has none. */
    public static function deduplicationId(mixed $job, string $payload, string $queue): ?string
    {
        if (!is_object($job)) {
            return null;
        }
        $id = match (true) {
            isset($job->deduplicator) && is_callable($job->deduplicator) => call_user_func($job->deduplicator, $payload, $queue),
            method_exists($job, 'deduplicationId') => $job->deduplicationId($payload, $queue),
            default => null,
        };
        return $id === null ? null : self::id($id, 'deduplication id', $job);
    }

    /** Whether the job names a deduplication id (without computing it). */
    public static function hasDeduplicator(object $job): bool
    {
        return (isset($job->deduplicator) && is_callable($job->deduplicator)) || method_exists($job, 'deduplicationId');
    }

    /** Writes the group into a payload array. */
    public function into(array $payload): array
    {
        if ($this->group !== null) {
            $payload[self::PAYLOAD_GROUP] = $this->group;
            if ($this->hold) {
                $payload[self::PAYLOAD_HOLD] = true;
            }
        }
        return $payload;
    }

    private static function id(mixed $value, string $what, mixed $job): string
    {
        $name = is_object($job) ? get_class($job) : (string) $job;
        if ($value instanceof \BackedEnum) {
            $value = $value->value;
        }
        if (is_int($value)) {
            $value = (string) $value;
        }
        if (!is_string($value)) {
            $type = get_debug_type($value);
            throw new \InvalidArgumentException("drover: the $what of $name is a $type; give a string, an int or a backed enum");
        }
        if ($value === '') {
            throw new \InvalidArgumentException("drover: the $what of $name is empty; give a non-empty string or leave it unset");
        }
        if (mb_strlen($value) > self::MAX_ID_LENGTH) {
            throw new \InvalidArgumentException("drover: the $what of $name is " . mb_strlen($value) . ' characters long; at most ' . self::MAX_ID_LENGTH . ' are allowed');
        }
        return $value;
    }
}
