<?php

namespace Drover\Dashboard\Workflows;

use Drover\Dashboard\HumanTime;

/**
 * A workflow's page put together from what the repositories read: each node with its state, why
 * it was cancelled or skipped, what it waits for now, its timing, its steps counted by state (a
 * sub-workflow's are its child's), the running steps with their progress and the failed ones
 * with their errors (as many as were read); and the graph's boxes. Pure: rows in, what the view
 * shows out.
 */
final class WorkflowPage
{
    /** Node states that let the nodes waiting for them go on, or stop them: ended. */
    private const ENDED = ['completed', 'failed', 'cancelled', 'skipped'];

    /**
     * @param list<object> $nodes WorkflowRepository::nodes()
     * @param array<string, object> $counts WorkflowRepository::stepCounts(), by node
     * @param array<string, list<object>> $running WorkflowRepository::runningSteps(), by node
     * @param array<string, list<object>> $failed WorkflowRepository::failedSteps(), by node
     * @param array<string, object> $failer the failer's records of failed steps, by uuid (FailedJobRepository::byUuids)
     * @param array<int, object> $subs the sub-workflows, by id (WorkflowRepository::summaries)
     * @param list<string> $signals the names of the signals sent
     * @param string $workflowState the workflow's: a node of a cancelled workflow that was
     *        running when it was cancelled, and has no step left in drover.jobs (a
     *        sub-workflow's node: whose child ended), is shown cancelled (its row stays
     *        `running`: nothing ends it, drover.workflow_cancel)
     * @return list<object>
     */
    public static function nodes(array $nodes, array $counts, array $running, array $failed, array $failer, array $subs, array $signals, \DateTimeInterface $now, string $workflowState = 'running'): array
    {
        $states = [];
        foreach ($nodes as $node) {
            $states[(string) $node->name] = (string) $node->state;
        }
        $shown = [];
        foreach ($nodes as $node) {
            $name = (string) $node->name;
            $c = $counts[$name] ?? null;
            $sub = $node->sub_wf === null ? null : ($subs[(int) $node->sub_wf] ?? null);
            $view = (object) [
                'name' => $name,
                'anchor' => 'node-' . (int) $node->position,
                'state' => (string) $node->state,
                'cause' => self::cause($node->cause === null ? null : (string) $node->cause),
                'deps' => $node->deps,
                'on_failure' => (string) $node->on_failure,
                'condition' => self::condition($node->condition),
                'waits' => self::waits($node, $signals),
                'wait_signal' => $node->wait_signal === null ? null : (string) $node->wait_signal,
                'waiting_for' => self::waitingFor($node, $states),
                'released_at' => $node->released_at,
                'due_at' => $node->due_at,
                'due_later' => (bool) $node->due_later,
                'ended_at' => $node->ended_at,
                'run_secs' => $node->released_at === null || $node->run_secs === null ? null : (float) $node->run_secs,
                'sub_wf' => $node->sub_wf === null ? null : (int) $node->sub_wf,
                'sub' => $sub,
                'total' => $sub !== null ? (int) $sub->steps : (int) ($c->total ?? 0),
                'completed' => $sub !== null ? (int) $sub->steps_done : (int) ($c->completed ?? 0),
                'failed' => $sub !== null ? (int) $sub->steps_failed : (int) ($c->failed ?? 0),
                'pending' => (int) ($c->pending ?? 0),
                'queued' => (int) ($c->queued ?? 0),
                'cancelled' => (int) ($c->cancelled ?? 0),
                'skipped' => (int) ($c->skipped ?? 0),
                'running' => isset($running[$name][0]) ? (int) $running[$name][0]->running : 0,
                'results' => (int) ($c->results ?? 0),
                'result_bytes' => (int) ($c->result_bytes ?? 0),
                'running_steps' => $running[$name] ?? [],
                'failed_steps' => array_map(fn (object $s) => self::failedStep($s, $failer), $failed[$name] ?? []),
            ];
            $over = $sub === null ? $view->queued === 0 : !in_array((string) $sub->state, ['pending', 'running'], true);
            if ($workflowState === 'cancelled' && $view->state === 'running' && $over) {
                [$view->state, $view->cause, $view->waiting_for] = ['cancelled', self::cause('cancelled'), null];
            }
            $view->done_share = $view->total > 0 ? $view->completed / $view->total : ($view->state === 'completed' ? 1.0 : null);
            $view->detail = self::detail($view, $now);
            $shown[] = $view;
        }
        return $shown;
    }

    /**
     * What the graph draws of each node, by name (GraphSvg::svg).
     *
     * @param list<object> $nodes self::nodes()
     * @return array<string, array{state: string, detail: string, href: string, title: string, done: ?float, sub: bool}>
     */
    public static function boxes(array $nodes): array
    {
        $boxes = [];
        foreach ($nodes as $n) {
            $title = $n->name . ' — ' . $n->state
                . ($n->total > 0 ? sprintf('; %s of %s steps done', number_format($n->completed), number_format($n->total)) : '')
                . ($n->failed > 0 ? ', ' . number_format($n->failed) . ' failed' : '')
                . ($n->running > 0 ? ', ' . number_format($n->running) . ' running' : '')
                . ($n->cause !== null ? '; ' . $n->cause : '')
                . ($n->waiting_for !== null ? '; waits for ' . $n->waiting_for : '');
            $boxes[$n->name] = [
                'state' => $n->state,
                'detail' => $n->detail,
                'href' => '#' . $n->anchor,
                'title' => $title,
                'done' => $n->total > 0 || $n->sub_wf !== null ? $n->done_share : null,
                'sub' => $n->sub_wf !== null,
            ];
        }
        return $boxes;
    }

    /** Why a node was cancelled or skipped, in words. */
    public static function cause(?string $cause): ?string
    {
        return match ($cause) {
            null => null,
            'condition' => 'its condition was false',
            'cancelled' => 'the workflow was cancelled',
            default => "“{$cause}” failed",
        };
    }

    /**
     * A node's condition in words: "when parse.rows > 1000".
     *
     * @param ?array<string, mixed> $condition
     */
    public static function condition(?array $condition): ?string
    {
        if ($condition === null) {
            return null;
        }
        $path = array_map('strval', array_filter((array) ($condition['path'] ?? []), 'is_scalar'));
        $subject = (string) ($condition['node'] ?? '?') . ($path === [] ? '' : '.' . implode('.', $path));
        $op = (string) ($condition['op'] ?? '?');
        if ($op === 'exists') {
            return "when $subject exists";
        }
        return "when $subject $op " . json_encode($condition['value'] ?? null, JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES);
    }

    /**
     * What a node is set to wait for, in words (its time after its dependencies, a signal), or
     * null.
     *
     * @param list<string> $signals the signals sent
     */
    private static function waits(object $node, array $signals): ?string
    {
        $parts = [];
        if ($node->wait_secs !== null && (float) $node->wait_secs > 0) {
            $parts[] = 'waits ' . HumanTime::duration((float) $node->wait_secs) . ' after its dependencies';
        }
        if ($node->wait_signal !== null) {
            $parts[] = 'waits for signal “' . $node->wait_signal . '”' . (in_array((string) $node->wait_signal, $signals, true) ? ' (sent)' : '');
        }
        return $parts === [] ? null : implode(', then ', $parts);
    }

    /**
     * What a node waits for now, in words: the signal it waits for, its time (its due time is
     * ahead), or its dependencies not yet ended; null when it waits for nothing.
     *
     * @param array<string, string> $states every node's state, by name
     */
    private static function waitingFor(object $node, array $states): ?string
    {
        return match ((string) $node->state) {
            'waiting' => 'signal “' . $node->wait_signal . '”',
            'running' => (bool) $node->due_later ? 'its time' : null,
            'pending' => ($open = array_values(array_filter($node->deps, fn (string $d) => !in_array($states[$d] ?? 'pending', self::ENDED, true)))) === []
                ? 'its workflow to start'
                : implode(', ', array_map(fn (string $d) => "“{$d}”", $open)),
            default => null,
        };
    }

    /** The second line of a node's box. */
    private static function detail(object $n, \DateTimeInterface $now): string
    {
        if ($n->state === 'waiting') {
            return 'waits for ' . ($n->waiting_for ?? 'a signal');
        }
        if ($n->state === 'running' && $n->due_later && $n->due_at !== null) {
            try {
                return 'due ' . HumanTime::relative(new \DateTimeImmutable((string) $n->due_at), $now);
            } catch (\Exception) {
                return 'waits for its time';
            }
        }
        if ($n->state === 'skipped' || ($n->state === 'cancelled' && $n->completed === 0)) {
            return $n->state;
        }
        $words = ($n->sub_wf !== null ? 'sub-workflow · ' : '')
            . number_format($n->completed) . '/' . number_format($n->total) . ' done';
        if ($n->failed > 0) {
            $words .= ' · ' . number_format($n->failed) . ' failed';
        } elseif ($n->running > 0) {
            $words .= ' · ' . number_format($n->running) . ' running';
        }
        return $words;
    }

    /**
     * A failed step as the page lists it: its error, or — where the failer took it (its error
     * says "see failed_jobs") — the failer's record: its key (a link to its page) and its
     * exception's first line, both redacted.
     *
     * @param array<string, object> $failer
     */
    private static function failedStep(object $step, array $failer): object
    {
        $record = $step->uuid === null ? null : ($failer[(string) $step->uuid] ?? null);
        $step->failed_key = $record?->key;
        $step->shown_error = $record !== null && (string) $record->exception_first_line !== ''
            ? (string) $record->exception_first_line
            : (string) ($step->error ?? '');
        return $step;
    }
}
