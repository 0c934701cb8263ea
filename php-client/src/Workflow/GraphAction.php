<?php

namespace Drover\Workflow;

/**
 * What an event made the graph do (Graph::next), in the order the database does it:
 *
 * - release(node, wait): the node's dependencies are all satisfied: with `wait` it now waits
 *   for its signal (no step runs yet); without, its steps go to drover.jobs (available after its
 *   wait, if it has one) or its sub-workflow starts — also when a retried step goes back;
 * - skip(node): released, but its condition is false;
 * - cancelled(nodes, cause): these nodes will not run, because of `cause` (the node whose
 *   failure cancelled them, or `cancelled` for the workflow's cancel);
 * - reopened(nodes): a retry opened again the nodes its step's failure had cancelled;
 * - finished(state): the workflow ended, completed, failed or cancelled.
 *
 * Written as text (`release(b)`, `release(b, wait)`, `cancelled(c, d; cause: b)`), which is what
 * the tests compare.
 */
final class GraphAction
{
    /**
     * @param list<string> $nodes
     */
    private function __construct(
        public readonly string $kind,
        public readonly array $nodes = [],
        public readonly bool $wait = false,
        public readonly ?string $cause = null,
        public readonly ?string $state = null,
    ) {
    }

    public static function release(string $node, bool $wait = false): self
    {
        return new self('release', [$node], wait: $wait);
    }

    public static function skip(string $node): self
    {
        return new self('skip', [$node]);
    }

    /** @param list<string> $nodes */
    public static function cancelled(array $nodes, string $cause): self
    {
        return new self('cancelled', $nodes, cause: $cause);
    }

    /** @param list<string> $nodes */
    public static function reopened(array $nodes): self
    {
        return new self('reopened', $nodes);
    }

    public static function finished(string $state): self
    {
        return new self('finished', state: $state);
    }

    /** This action and $next as one, when $next cancels more nodes for the same cause; else null. */
    public function merged(self $next): ?self
    {
        if ($this->kind !== 'cancelled' || $next->kind !== 'cancelled' || $this->cause !== $next->cause) {
            return null;
        }
        return self::cancelled([...$this->nodes, ...$next->nodes], (string) $this->cause);
    }

    public function __toString(): string
    {
        return match ($this->kind) {
            'release' => "release({$this->nodes[0]}" . ($this->wait ? ', wait' : '') . ')',
            'skip' => "skip({$this->nodes[0]})",
            'cancelled' => 'cancelled(' . implode(', ', $this->nodes) . "; cause: {$this->cause})",
            'reopened' => 'reopened(' . implode(', ', $this->nodes) . ')',
            'finished' => "finished({$this->state})",
        };
    }
}
