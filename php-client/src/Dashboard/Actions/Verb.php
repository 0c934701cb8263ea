<?php

namespace Drover\Dashboard\Actions;

use Drover\Dashboard\Search\State;

/**
 * What an operator may do to all the jobs a search matches, and to which states: a running job is
 * never deleted or moved under its worker (it is stopped, one at a time, from its own page).
 * Pure: the rules, unit-tested; Bulk carries them out.
 */
enum Verb: string
{
    /** Push failed jobs back onto their queues (queue:retry), or a kept one's payload as it was. */
    case Retry = 'retry';
    /** Remove pending or delayed jobs before they run. */
    case Delete = 'delete';
    /** Remove failed jobs from the failer (queue:forget), or from drover.failed_jobs. */
    case Forget = 'forget';
    /** Put pending or delayed jobs on another queue, keeping their place in time. */
    case Move = 'move';
    /** Let the groups that hold these jobs go on, without their failed job. */
    case Release = 'release';

    /** @return list<State> */
    public function states(): array
    {
        return match ($this) {
            self::Retry => [State::Failed, State::Kept],
            self::Delete, self::Move => [State::Pending, State::Delayed],
            self::Forget => [State::Failed, State::Kept],
            self::Release => [State::Held],
        };
    }

    /** @return list<self> what may be done to the jobs of a state */
    public static function for(State $state): array
    {
        return array_values(array_filter(self::cases(), fn (self $v) => in_array($state, $v->states(), true)));
    }

    /** The button's words, and the confirmation's. */
    public function label(): string
    {
        return match ($this) {
            self::Retry => 'Retry',
            self::Delete => 'Delete',
            self::Forget => 'Forget',
            self::Move => 'Move to another queue',
            self::Release => 'Release their groups',
        };
    }

    /** Whether the verb takes a queue to act towards (Move). */
    public function needsQueue(): bool
    {
        return $this === self::Move;
    }

    /**
     * Why the verb cannot be done to a state's jobs with this destination, or null.
     */
    public function refusal(State $state, ?string $queue): ?string
    {
        if (!in_array($state, $this->states(), true)) {
            $names = implode(', ', array_map(fn (State $s) => $s->value, $this->states()));
            return "{$this->value} applies to $names jobs, not {$state->value} ones";
        }
        if ($this->needsQueue()) {
            if ($queue === null || trim($queue) === '') {
                return 'move needs the queue to move the jobs to';
            }
            if (mb_strlen($queue) > 200) {
                return 'the queue to move to is longer than 200 characters';
            }
        }
        return null;
    }
}
