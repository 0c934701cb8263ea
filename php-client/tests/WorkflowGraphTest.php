<?php

namespace Drover\Tests;

use Drover\Workflow\Condition;
use Drover\Workflow\Graph;
use Drover\Workflow\GraphAction;
use Drover\Workflow\GraphEvent as E;
use Drover\Workflow\GraphNode;
use Drover\Workflow\GraphState;
use Drover\Workflow\InvalidWorkflow;
use PHPUnit\Framework\TestCase;

/**
 * The rules of a workflow's graph (issue 60), scenario by scenario, on the pure state machine
 * (Workflow\Graph): the same rules broker/migrations/0016_workflows.sql applies in the database,
 * without one. Each test drives a graph through events and compares what each did (GraphAction,
 * as text) and where the nodes are. (The console's drawing of a graph is tested apart, in
 * WorkflowConsolePartsTest.)
 */
final class WorkflowGraphTest extends TestCase
{
    public function testADiamondRunsEachNodeOnceItsParentsCompleted(): void
    {
        $g = self::graph(['a' => [], 'b' => ['a'], 'c' => ['a'], 'd' => ['b', 'c']]);
        [$s, $did] = self::drive($g, E::start(), E::stepEnded('a', 'completed'), E::stepEnded('b', 'completed'), E::stepEnded('c', 'completed'), E::stepEnded('d', 'completed'));
        $this->assertSame([
            ['release(a)'],
            ['release(b)', 'release(c)'],
            [],
            ['release(d)'],
            ['finished(completed)'],
        ], $did);
        $this->assertSame(['' => 'completed', 'a' => 'completed', 'b' => 'completed', 'c' => 'completed', 'd' => 'completed'], $s->states());
    }

    public function testAFanInIsReleasedOnceByWhicheverParentEndsLast(): void
    {
        $g = self::graph(['a' => [], 'b' => ['a'], 'c' => ['a'], 'd' => ['b', 'c']]);
        foreach ([['b', 'c'], ['c', 'b']] as [$first, $last]) {
            [$s, $did] = self::drive($g, E::start(), E::stepEnded('a', 'completed'), E::stepEnded($first, 'completed'), E::stepEnded($last, 'completed'));
            $this->assertSame([], $did[2], "$first ended first: d still waits for $last");
            $this->assertSame(['release(d)'], $did[3], "$last ended last: d is released, once");
            $this->assertSame('running', $s->state('d'));
            // The same end applied twice (an event delivered again) releases nothing more.
            [, $again] = $g->next($s, E::stepEnded($last, 'completed'));
            $this->assertSame([], array_map('strval', $again));
        }
    }

    public function testAFanOutNodeEndsWhenItsLastStepEnds(): void
    {
        $g = new Graph('resize', [new GraphNode('parse'), new GraphNode('resize', ['parse'], members: 3), new GraphNode('report', ['resize'])]);
        [$s, $did] = self::drive($g, E::start(), E::stepEnded('parse', 'completed'), E::stepEnded('resize', 'completed', 2), E::stepEnded('resize', 'completed', 0));
        $this->assertSame([['release(parse)'], ['release(resize)'], [], []], $did);
        $this->assertSame(1, $s->left('resize'));
        [$s, $did] = self::drive($g, $s, E::stepEnded('resize', 'completed', 1));
        $this->assertSame([['release(report)']], $did);
        $this->assertSame('completed', $s->state('resize'));
    }

    public function testOneFailedStepOfAFanOutFailsItsNodeOnceTheOthersEnded(): void
    {
        $g = new Graph('resize', [new GraphNode('resize', members: 3), new GraphNode('report', ['resize'])]);
        [$s, $did] = self::drive($g, E::start(), E::stepEnded('resize', 'failed', 0), E::stepEnded('resize', 'completed', 1));
        $this->assertSame([['release(resize)'], [], []], $did, 'a failed step does not end its node while others run');
        [$s, $did] = self::drive($g, $s, E::stepEnded('resize', 'completed', 2));
        $this->assertSame([['cancelled(report; cause: resize)', 'finished(failed)']], $did);
        $this->assertSame('failed', $s->state('resize'));
    }

    public function testAFailureUnderCancelCancelsItsDependantsTransitivelyNamingIt(): void
    {
        // a → b → c → e, and d after a only: d still runs.
        $g = self::graph(['a' => [], 'b' => ['a'], 'c' => ['b'], 'd' => ['a'], 'e' => ['c']]);
        [$s, $did] = self::drive($g, E::start(), E::stepEnded('a', 'completed'), E::stepEnded('b', 'failed'));
        $this->assertSame(['release(b)', 'release(d)'], $did[1]);
        $this->assertSame(['cancelled(c, e; cause: b)'], $did[2], 'b\'s failure cancels c and, through it, e, naming b');
        $this->assertSame(['c' => 'b', 'e' => 'b'], ['c' => $s->cause('c'), 'e' => $s->cause('e')]);
        $this->assertSame('running', $s->workflow, 'd still runs');
        [$s, $did] = self::drive($g, $s, E::stepEnded('d', 'completed'));
        $this->assertSame([['finished(failed)']], $did);
        $this->assertSame(['' => 'failed', 'a' => 'completed', 'b' => 'failed', 'c' => 'cancelled', 'd' => 'completed', 'e' => 'cancelled'], $s->states());
    }

    public function testAFailureUnderContinueLetsItsDependantsRunAndTheWorkflowStillFails(): void
    {
        $g = new Graph('w', [new GraphNode('a'), new GraphNode('b', ['a'], onFailure: GraphNode::CONTINUE), new GraphNode('report', ['b'])]);
        [$s, $did] = self::drive($g, E::start(), E::stepEnded('a', 'completed'), E::stepEnded('b', 'failed'), E::stepEnded('report', 'completed'));
        $this->assertSame([['release(a)'], ['release(b)'], ['release(report)'], ['finished(failed)']], $did);
        $this->assertSame('failed', $s->state('b'));
        $this->assertSame('completed', $s->state('report'));
    }

    public function testADeletedStepCountsAsFailedNotCompleted(): void
    {
        $g = self::graph(['a' => [], 'b' => ['a']]);
        [$s, $did] = self::drive($g, E::start(), E::stepEnded('a', 'deleted'));
        $this->assertSame(['cancelled(b; cause: a)', 'finished(failed)'], $did[1]);
        $this->assertSame('failed', $s->state('a'));
    }

    public function testTheFirstBlockerByDeclarationNamesTheCauseAndACancelledOnePassesItsCauseOn(): void
    {
        // c after a and b; b fails first (a still runs): c is cancelled at once, cause b, and d,
        // after c, is cancelled naming b too — not c.
        $g = self::graph(['a' => [], 'b' => [], 'c' => ['a', 'b'], 'd' => ['c']]);
        [$s, $did] = self::drive($g, E::start(), E::stepEnded('b', 'failed'), E::stepEnded('a', 'failed'));
        $this->assertSame(['cancelled(c, d; cause: b)'], $did[1]);
        $this->assertSame(['finished(failed)'], $did[2], 'a\'s failure finds c already cancelled');
        $this->assertSame('b', $s->cause('d'));
    }

    public function testRetryingAFailedStepReopensTheNodesItsFailureCancelledAndTheRestFinish(): void
    {
        $g = self::graph(['a' => [], 'b' => ['a'], 'c' => ['b'], 'd' => ['a'], 'e' => ['c']]);
        [$s] = self::drive($g, E::start(), E::stepEnded('a', 'completed'), E::stepEnded('b', 'failed'), E::stepEnded('d', 'completed'));
        $this->assertSame('failed', $s->workflow);
        [$s, $did] = self::drive($g, $s, E::retry('b'));
        $this->assertSame([['reopened(c, e)', 'release(b)']], $did);
        $this->assertSame(['' => 'running', 'a' => 'completed', 'b' => 'running', 'c' => 'pending', 'd' => 'completed', 'e' => 'pending'], $s->states());
        $this->assertNull($s->cause('c'));
        [$s, $did] = self::drive($g, $s, E::stepEnded('b', 'completed'), E::stepEnded('c', 'completed'), E::stepEnded('e', 'completed'));
        $this->assertSame([['release(c)'], ['release(e)'], ['finished(completed)']], $did);
    }

    public function testRetryingOneFailedStepOfANodeStillRunningReopensNothing(): void
    {
        $g = new Graph('w', [new GraphNode('many', members: 2), new GraphNode('after', ['many'])]);
        [$s, $did] = self::drive($g, E::start(), E::stepEnded('many', 'failed', 0), E::retry('many'));
        $this->assertSame(['release(many)'], $did[2], 'the failed step runs again');
        $this->assertSame(2, $s->left('many'));
        [$s, $did] = self::drive($g, $s, E::stepEnded('many', 'completed', 0), E::stepEnded('many', 'completed', 1));
        $this->assertSame([[], ['release(after)']], $did, 'the retried step\'s success counts: the node completed');
    }

    public function testARetryNeedsAFailedStepAndAWorkflowNotCancelled(): void
    {
        $g = self::graph(['a' => [], 'b' => ['a']]);
        [$s, $did] = self::drive($g, E::start(), E::retry('a'));
        $this->assertSame([], $did[1], 'a has not failed');
        [$s, $did] = self::drive($g, $s, E::stepEnded('a', 'failed'), E::cancel(), E::retry('a'));
        $this->assertSame(['cancelled(b; cause: a)', 'finished(failed)'], $did[0]);
        $this->assertSame([], $did[1], 'a workflow that failed is not cancelled…');
        $this->assertSame(['reopened(b)', 'release(a)'], $did[2], '…but retried');
        $this->assertSame('running', $s->workflow);
        [$s] = self::drive($g, $g->initial(), E::start(), E::cancel(), E::stepEnded('a', 'failed'));
        [$s, $did] = self::drive($g, $s, E::retry('a'));
        $this->assertSame([[]], $did, 'a cancelled workflow is not retried');
        $this->assertSame('cancelled', $s->workflow);
    }

    public function testAFalseConditionSkipsItsNodeAndASkippedNodeSatisfiesWhatFollows(): void
    {
        $g = new Graph('w', [
            new GraphNode('parse'),
            new GraphNode('big', ['parse'], condition: Condition::declared(['parse', 'rows', '>', 1000], 'w', 'big')),
            new GraphNode('small', ['parse'], condition: Condition::declared(['parse', 'rows', '<=', 1000], 'w', 'small')),
            new GraphNode('report', ['big', 'small']),
        ]);
        [$s, $did] = self::drive($g, E::start(), E::stepEnded('parse', 'completed', 0, '{"rows": 10}'));
        $this->assertSame(['skip(big)', 'release(small)'], $did[1]);
        $this->assertSame('condition', $s->cause('big'));
        [$s, $did] = self::drive($g, $s, E::stepEnded('small', 'completed'));
        $this->assertSame([['release(report)']], $did, 'skipped is satisfied');
        [$s, $did] = self::drive($g, $s, E::stepEnded('report', 'completed'));
        $this->assertSame([['finished(completed)']], $did, 'a skipped node does not fail its workflow');
    }

    public function testAConditionOnAResultNeverRecordedIsFalse(): void
    {
        $g = new Graph('w', [new GraphNode('a'), new GraphNode('b', ['a'], condition: Condition::declared(['a', 'ok', '=', true], 'w', 'b'))]);
        [, $did] = self::drive($g, E::start(), E::stepEnded('a', 'completed'));
        $this->assertSame(['skip(b)', 'finished(completed)'], $did[1]);
    }

    public function testAConditionReadsTheFirstMemberThatRecordedAResult(): void
    {
        $g = new Graph('w', [new GraphNode('a', members: 3), new GraphNode('b', ['a'], condition: Condition::declared(['a', '', '=', 'first'], 'w', 'b'))]);
        [, $did] = self::drive($g, E::start(), E::stepEnded('a', 'completed', 2, '"third"'), E::stepEnded('a', 'completed', 0), E::stepEnded('a', 'completed', 1, '"first"'));
        $this->assertSame(['release(b)'], $did[3], 'member 1 is the lowest that recorded one (member 0 recorded none)');
    }

    public function testASignalSentBeforeItsNodeIsReachedLetsItRunWithoutWaiting(): void
    {
        $g = new Graph('w', [new GraphNode('a'), new GraphNode('publish', ['a'], signal: 'approved')]);
        [$s, $did] = self::drive($g, E::start(), E::signal('approved'), E::stepEnded('a', 'completed'));
        $this->assertSame([['release(a)'], [], ['release(publish)']], $did);
        $this->assertSame(['approved'], $s->signals);
    }

    public function testANodeReachedBeforeItsSignalWaitsForIt(): void
    {
        $g = new Graph('w', [new GraphNode('a'), new GraphNode('publish', ['a'], signal: 'approved'), new GraphNode('other', ['a'], signal: 'other')]);
        [$s, $did] = self::drive($g, E::start(), E::stepEnded('a', 'completed'));
        $this->assertSame(['release(publish, wait)', 'release(other, wait)'], $did[1]);
        $this->assertSame('waiting', $s->state('publish'));
        [$s, $did] = self::drive($g, $s, E::signal('approved'), E::signal('approved'), E::stepEnded('publish', 'completed'));
        $this->assertSame([['release(publish)'], [], []], $did, 'only the nodes waiting for that signal, once');
        [$s, $did] = self::drive($g, $s, E::signal('other'), E::stepEnded('other', 'completed'), E::signal('late'));
        $this->assertSame([['release(other)'], ['finished(completed)'], []], $did);
        $this->assertSame(['approved', 'other'], $s->signals, 'a workflow that ended takes no signal');
    }

    public function testASignalToAPendingWorkflowIsKeptForWhenItStarts(): void
    {
        $g = new Graph('w', [new GraphNode('a', signal: 'go')]);
        [, $did] = self::drive($g, E::signal('go'), E::start());
        $this->assertSame([[], ['release(a)']], $did);
    }

    public function testCancellingAWorkflowCancelsWhatHasNotRunAndRunningStepsReleaseNothing(): void
    {
        $g = new Graph('w', [new GraphNode('a'), new GraphNode('b', ['a']), new GraphNode('c', signal: 'never'), new GraphNode('d', ['b'])]);
        [$s, $did] = self::drive($g, E::start(), E::cancel(), E::stepEnded('a', 'completed'), E::cancel());
        $this->assertSame(['release(a)', 'release(c, wait)'], $did[0]);
        $this->assertSame(['cancelled(b, c, d; cause: cancelled)', 'finished(cancelled)'], $did[1]);
        $this->assertSame([], $did[2], 'a finished running and released nothing');
        $this->assertSame([], $did[3], 'cancelled once');
        $this->assertSame('cancelled', $s->workflow);
    }

    public function testANodeWithoutStepsCompletesAsSoonAsItIsReleased(): void
    {
        $g = new Graph('w', [new GraphNode('a'), new GraphNode('none', ['a'], members: 0), new GraphNode('c', ['none'])]);
        [, $did] = self::drive($g, E::start(), E::stepEnded('a', 'completed'));
        $this->assertSame(['release(none)', 'release(c)'], $did[1]);
        $empty = new Graph('w', [new GraphNode('none', members: 0)]);
        [, $did] = self::drive($empty, E::start());
        $this->assertSame([['release(none)', 'finished(completed)']], $did);
    }

    public function testASubWorkflowNodeEndsWithItsSubWorkflow(): void
    {
        $g = new Graph('w', [new GraphNode('thumbs', subWorkflow: true), new GraphNode('after', ['thumbs'])]);
        [, $did] = self::drive($g, E::start(), E::stepEnded('thumbs', 'failed'));
        $this->assertSame([['release(thumbs)'], ['cancelled(after; cause: thumbs)', 'finished(failed)']], $did);
    }

    public function testACycleIsRefusedNamingItsSteps(): void
    {
        $this->assertRefused(
            self::graph(['fetch' => [], 'a' => ['fetch', 'c'], 'b' => ['a'], 'c' => ['b'], 'report' => ['c']]),
            'drover: workflow "w" has a cycle among its steps: "a" → "b" → "c" → "a" (each runs after the one before it), so none of them can ever run; remove one of these after:',
        );
        $this->assertRefused(
            self::graph(['a' => ['b'], 'b' => ['a']]),
            'drover: workflow "w" has a cycle: "a" and "b" each run after the other; remove one of the two after: so that one can run first',
        );
    }

    public function testAStepAfterItselfIsRefused(): void
    {
        $this->assertRefused(self::graph(['a' => ['a']]), 'drover: workflow "w": step "a" runs after itself; remove "a" from its after:');
    }

    public function testTwoStepsOfOneNameAreRefused(): void
    {
        $this->assertRefused(
            new Graph('w', [new GraphNode('a'), new GraphNode('b'), new GraphNode('a')]),
            'drover: workflow "w" has two steps named "a"; give each step its own name (addMany() puts many jobs under one)',
        );
    }

    public function testAnAfterNamingAStepTheWorkflowDoesNotHaveIsRefused(): void
    {
        $this->assertRefused(
            self::graph(['fetch' => [], 'parse' => ['fecth']]),
            'drover: workflow "w": step "parse" runs after "fecth", which the workflow does not have (its steps: fetch, parse); add a step "fecth" or fix the name in after:',
        );
    }

    public function testAConditionOnAStepItDoesNotRunAfterIsRefused(): void
    {
        $this->assertRefused(
            new Graph('w', [new GraphNode('a'), new GraphNode('b'), new GraphNode('c', ['a'], condition: Condition::declared(['b', 'x', 'exists'], 'w', 'c'))]),
            'drover: workflow "w": step "c" has a condition on the result of "b", which it does not run after (it runs after a); add "b" to its after: or put the condition on one of those',
        );
    }

    public function testAnEmptyWorkflowAndBadNamesAreRefused(): void
    {
        $this->assertRefused(new Graph('w', []), 'drover: workflow "w" has no steps; add one with ->add(\'name\', new SomeJob)');
        $this->assertRefused(new Graph('', [new GraphNode('a')]), 'drover: a workflow\'s name is empty; name it with 1 to 200 characters');
        $this->assertRefused(new Graph(str_repeat('é', 201), [new GraphNode('a')]), 'drover: a workflow\'s name is 201 characters long; name it with 1 to 200 characters');
        $this->assertRefused(new Graph('w', [new GraphNode('')]), 'drover: workflow "w" has a step whose name is empty; name each step with 1 to 200 characters');
        $this->assertRefused(new Graph('w', [new GraphNode('a', signal: '')]), 'drover: workflow "w": step "a" waits for a signal whose name is empty; name it with 1 to 200 characters');
        $this->assertRefused(new Graph('w', [new GraphNode('a', onFailure: 'ignore')]), "drover: workflow \"w\": step \"a\" has onFailure: 'ignore'; give 'cancel' (the default: the steps after it are cancelled) or 'continue' (they run as if it had completed)");
        $this->assertRefused(new Graph('w', [new GraphNode('a', waitSecs: -1.0)]), 'drover: workflow "w": step "a" waits -1 seconds; give a wait of 0 or more');
    }

    public function testAValidGraphIsWrittenAsWorkflowCreateTakesIt(): void
    {
        $g = new Graph('w', [
            new GraphNode('a'),
            new GraphNode('b', ['a'], GraphNode::CONTINUE, 2.5, 'go', Condition::declared(['a', 'stats.rows', '>=', 3], 'w', 'b')),
        ]);
        $g->validate();
        $this->assertSame([
            ['name' => 'a', 'deps' => [], 'on_failure' => 'cancel', 'wait_secs' => null, 'wait_signal' => null, 'condition' => null],
            ['name' => 'b', 'deps' => ['a'], 'on_failure' => 'continue', 'wait_secs' => 2.5, 'wait_signal' => 'go',
                'condition' => ['node' => 'a', 'path' => ['stats', 'rows'], 'op' => '>=', 'value' => 3]],
        ], $g->toArray());
    }

    /**
     * The conditions' rule, case by case (drover.wf_condition_holds says the same:
     * WorkflowDispatchTest::testConditionsHoldInPhpAsInTheDatabase compares the two).
     */
    public function testConditionsHoldAsTheDatabaseDecidesThem(): void
    {
        $cases = [
            // [when, result JSON or null, holds]
            [['a', 'rows', '>', 1000], '{"rows": 1001}', true],
            [['a', 'rows', '>', 1000], '{"rows": 1000}', false],
            [['a', 'rows', '>=', 1000], '{"rows": 1000.0}', true],
            [['a', 'rows', '<', 1000], '{"rows": "999"}', false],              // a string is not a number
            [['a', 'name', '>', 'b'], '{"name": "c"}', true],
            [['a', 'rows', '=', 1], '{"rows": 1.0}', true],
            [['a', 'rows', '=', 1], null, false],                               // nothing recorded
            [['a', 'rows', '!=', 1], null, true],                               // missing is distinct from 1
            [['a', 'rows', '!=', 1], '{"other": 1}', true],
            [['a', 'rows', '!=', 1], '{"rows": 1}', false],
            [['a', 'rows', 'exists'], '{"rows": 0}', true],
            [['a', 'rows', 'exists'], '{"rows": null}', false],
            [['a', 'rows', 'exists'], '{}', false],
            [['a', 'rows', '=', null], '{"rows": null}', true],
            [['a', 'meta', '=', ['y' => 2, 'x' => [1, 'two']]], '{"meta": {"x": [1, "two"], "y": 2}}', true],
            [['a', 'meta', '=', [1, 2]], '{"meta": [2, 1]}', false],
            [['a', 'items.-1.id', '=', 'last'], '{"items": [{"id": "first"}, {"id": "last"}]}', true],
            [['a', 'items.1', 'exists'], '{"items": [1]}', false],
            [['a', '', '=', 'whole'], '"whole"', true],
            [['a', ['dotted.key'], '=', 1], '{"dotted.key": 1}', true],
            [['a', 'rows', '!=', 1], 'not json', false],                        // not JSON: false, even for !=
            [['a', 'rows', '>', 1], '{"rows": true}', false],
        ];
        foreach ($cases as $i => [$when, $result, $holds]) {
            $this->assertSame($holds, Condition::declared($when, 'w', 'b')->holds($result), "case $i: " . json_encode($when) . ' of ' . var_export($result, true));
        }
    }

    public function testAConditionThatCannotBeReadIsRefusedSayingHowToWriteIt(): void
    {
        $refusals = [
            [['a', 'rows'], 'drover: workflow "w": step "b" has a condition (when:) of 2 elements; write it as [step, \'dotted.path\', operator, value], or [step, \'dotted.path\', \'exists\']'],
            [['a', 'rows', '==', 1], "drover: workflow \"w\": step \"b\" has a condition (when:) with the operator '=='; use one of = != > >= < <= exists"],
            [['a', 'rows', '>'], 'drover: workflow "w": step "b" has a condition (when:) with `>` and no value; write it as [step, \'dotted.path\', operator, value], or [step, \'dotted.path\', \'exists\']'],
            [['a', 'rows', 'exists', 1], 'drover: workflow "w": step "b" has a condition (when:) with `exists` and a value; `exists` takes none: [step, \'dotted.path\', \'exists\']'],
            [['a', 'a..b', 'exists'], 'drover: workflow "w": step "b" has a condition (when:) whose path has an empty or non-text key; give keys such as \'stats.rows\' or [\'stats\', \'rows\']'],
            [['a', 'x', '=', NAN], 'drover: workflow "w": step "b" has a condition (when:) whose value cannot be written as JSON (Inf and NaN cannot be JSON encoded); compare with a string, a number, a boolean, null or an array of those'],
        ];
        foreach ($refusals as [$when, $said]) {
            try {
                Condition::declared($when, 'w', 'b');
                $this->fail('expected InvalidWorkflow for ' . json_encode($when));
            } catch (InvalidWorkflow $e) {
                $this->assertSame($said, $e->getMessage());
            }
        }
    }

    public function testAnActionReadsAsText(): void
    {
        $this->assertSame('cancelled(c, d; cause: b)', (string) GraphAction::cancelled(['c'], 'b')->merged(GraphAction::cancelled(['d'], 'b')));
        $this->assertNull(GraphAction::cancelled(['c'], 'b')->merged(GraphAction::cancelled(['d'], 'x')));
        $this->assertSame('release(b, wait)', (string) GraphAction::release('b', wait: true));
    }

    /**
     * A graph of nodes of one step each, `name => [deps]`, in that order.
     *
     * @param array<string, list<string>> $deps
     */
    private static function graph(array $deps): Graph
    {
        return new Graph('w', array_map(fn (string $name, array $after) => new GraphNode($name, $after), array_keys($deps), $deps));
    }

    /**
     * Applies the events in order, from $state (the graph's initial state when the first argument
     * is an event): the state after the last, and what each event did as text.
     *
     * @return array{0: GraphState, 1: list<list<string>>}
     */
    private static function drive(Graph $g, GraphState|E $state, E ...$events): array
    {
        if ($state instanceof E) {
            array_unshift($events, $state);
            $state = $g->initial();
        }
        $did = [];
        foreach ($events as $event) {
            [$state, $actions] = $g->next($state, $event);
            $did[] = array_map('strval', $actions);
        }
        return [$state, $did];
    }

    private function assertRefused(Graph $g, string $message): void
    {
        try {
            $g->validate();
            $this->fail("expected InvalidWorkflow: $message");
        } catch (InvalidWorkflow $e) {
            $this->assertSame($message, $e->getMessage());
        }
    }
}
