<?php

namespace Drover\Queue;

/**
 * A job's place in the fair share of its queue (docs/limits.md, "Fair share"): its key (the
 * tenant whose turn it takes) and the key's weight. Read at dispatch from the job — its
 * `$fairKey` property or `fairKey()` method, and `$fairWeight` / `fairWeight()` (default 1) — the
 * way GroupOptions reads a group, and written into the payload so that a retry keeps it.
 *
 * A queue is fair when `fair` in config/drover.php names it (`connection:queue`, or a bare queue
 * name for the `drover` connection). On a fair queue a job without a key takes the turns of the
 * key '' (every such job shares them). A key on a queue that is not fair, a key that is not a
 * string, an int or a backed enum of at most 255 characters, and a weight that is not above 0
 * and at most 1000 are refused at dispatch, naming the job.
 */
final class FairShare
{
    /** The payload key a job of a fair queue carries: [key, weight]. */
    public const PAYLOAD_KEY = 'droverFair';

    public const MAX_KEY_LENGTH = 255;

    public const MAX_WEIGHT = 1000;

    private function __construct(
        /** The key whose turns the job takes. */
        public readonly string $key,
        /** The key's weight: a weight of 2 takes twice the turns of a weight of 1. */
        public readonly float $weight,
    ) {
    }

    /**
     * The job's share on `$queue`, or null when the queue is not fair.
     *
     * @param bool $fair whether `$queue` is fair
     */
    public static function ofJob(mixed $job, string $queue, bool $fair): ?self
    {
        $name = is_object($job) ? get_class($job) : (is_string($job) ? $job : 'the job');
        $key = is_object($job) ? ($job->fairKey ?? (method_exists($job, 'fairKey') ? $job->fairKey() : null)) : null;
        $weight = is_object($job) ? ($job->fairWeight ?? (method_exists($job, 'fairWeight') ? $job->fairWeight() : null)) : null;
        if (!$fair) {
            if ($key !== null) {
                throw new \InvalidArgumentException("drover: $name names the fair key '" . (is_scalar($key) ? $key : get_debug_type($key)) . "' but queue '$queue' is not fair; add it to `fair` in config/drover.php or drop the key");
            }
            return null;
        }
        return self::checked($key ?? '', $weight ?? 1, $name);
    }

    /** The share a payload carries (a retried or raw job), or null. */
    public static function ofPayload(string $payload): ?self
    {
        if (!str_contains($payload, '"' . self::PAYLOAD_KEY . '"')) {
            return null;
        }
        $decoded = json_decode($payload, true);
        $name = is_array($decoded) && is_string($decoded['displayName'] ?? null) ? $decoded['displayName'] : 'a raw payload';
        $share = is_array($decoded) ? ($decoded[self::PAYLOAD_KEY] ?? null) : null;
        if (!is_array($share) || !array_is_list($share) || count($share) !== 2 || !is_string($share[0]) || !is_int($share[1]) && !is_float($share[1])) {
            throw new \InvalidArgumentException('drover: the ' . self::PAYLOAD_KEY . " of $name is not [key, weight]; dispatch the job again rather than edit its payload");
        }
        return self::checked($share[0], $share[1], $name);
    }

    /**
     * Whether `$queue` of queue connection `$connection` is fair by `$fair` (config/drover.php's
     * `fair`: `connection:queue` entries, a bare name meaning the `drover` connection).
     *
     * @param list<string> $fair
     */
    public static function isFair(array $fair, string $connection, string $queue): bool
    {
        foreach ($fair as $entry) {
            [$c, $q] = str_contains($entry, ':') ? explode(':', $entry, 2) : ['drover', $entry];
            if ($c === $connection && $q === $queue) {
                return true;
            }
        }
        return false;
    }

    /** Writes the share into a payload array. */
    public function into(array $payload): array
    {
        $payload[self::PAYLOAD_KEY] = [$this->key, $this->weight];
        return $payload;
    }

    private static function checked(mixed $key, mixed $weight, string $name): self
    {
        if ($key instanceof \BackedEnum) {
            $key = $key->value;
        }
        if (is_int($key)) {
            $key = (string) $key;
        }
        if (!is_string($key)) {
            throw new \InvalidArgumentException("drover: the fair key of $name is a " . get_debug_type($key) . '; give a string, an int or a backed enum');
        }
        if (mb_strlen($key) > self::MAX_KEY_LENGTH) {
            throw new \InvalidArgumentException("drover: the fair key of $name is " . mb_strlen($key) . ' characters long; at most ' . self::MAX_KEY_LENGTH . ' are allowed');
        }
        if ((!is_int($weight) && !is_float($weight)) || !($weight > 0) || $weight > self::MAX_WEIGHT) {
            throw new \InvalidArgumentException("drover: the fair weight of $name is " . var_export($weight, true) . '; give a number above 0 and at most ' . self::MAX_WEIGHT);
        }
        return new self($key, (float) $weight);
    }
}
