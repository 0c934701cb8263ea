@extends('drover::layout', ['refresh' => $refresh])
@section('title', 'Workflow ' . $workflow->name)
@section('content')
@php($ago = fn ($t) => \Drover\Dashboard\HumanTime::html($t))
@php($bytes = fn (int $b) => $b < 1024 ? $b . ' B' : ($b < 1048576 ? number_format($b / 1024, 1) . ' KiB' : number_format($b / 1048576, 1) . ' MiB'))
@php($operate = ($canOperate ?? false))
<h1>Workflow #{{ $workflow->id }} {{ $workflow->name }} <span class="badge st-{{ $workflow->state }}" id="workflow-state">{{ $workflow->state }}</span></h1>
<table class="detail workflow-detail">
  @if ($workflow->parent !== null)
    <tr><th>Sub-workflow of</th><td><a href="{{ route('drover.workflow', $workflow->parent) }}">#{{ $workflow->parent }} {{ $workflow->parent_name }}</a>, its node “{{ $workflow->parent_node }}”</td></tr>
  @endif
  <tr><th>Steps</th><td id="workflow-steps">{{ number_format($steps['completed']) }} of {{ number_format($workflow->steps) }} done{{ $steps['failed'] > 0 ? ', ' . number_format($steps['failed']) . ' failed' : '' }}{{ $steps['running'] > 0 ? ', ' . number_format($steps['running']) . ' running' : '' }}</td></tr>
  <tr><th>Nodes</th><td>{{ number_format($workflow->nodes - $workflow->nodes_left) }} of {{ number_format($workflow->nodes) }} ended</td></tr>
  <tr><th>Created</th><td>{!! $ago($workflow->created_at) !!}@if ($workflow->unique_name) <span class="muted">(a unique name: a second is refused while it runs)</span>@endif</td></tr>
  <tr><th>Started / finished</th><td>{!! $ago($workflow->started_at) !!} → {!! $ago($workflow->finished_at) !!}</td></tr>
  <tr><th>Duration</th><td>{{ $workflow->started_at === null ? '–' : \Drover\Dashboard\HumanTime::duration((float) $workflow->run_secs) . ($workflow->finished_at === null ? ' so far' : '') }}</td></tr>
  <tr><th>Signals</th><td id="signals">@forelse ($signals as $s)<div class="signal" data-signal="{{ $s->name }}">“{{ $s->name }}” {!! $ago($s->sent_at) !!}@if ($s->data !== null) <details class="inline"><summary class="muted">{{ $bytes((int) $s->bytes) }} of data</summary><pre>{{ $s->data }}</pre></details>@endif</div>@empty<span class="muted">none sent</span>@endforelse</td></tr>
</table>
@if ($operate && $live)
  <p class="workflow-actions">
    @if ($workflow->parent === null)
      <form class="inline" method="post" action="{{ route('drover.workflow.cancel', $workflow->id) }}">@csrf<button type="submit" class="danger cancel-workflow">Cancel the workflow</button></form>
    @else
      <span class="muted">A sub-workflow is cancelled with <a href="{{ route('drover.workflow', $workflow->parent) }}">its parent</a>.</span>
    @endif
    <a class="send-signal" href="{{ route('drover.workflow.signal-form', $workflow->id) }}"><button type="button">Send a signal…</button></a>
  </p>
@endif

<h2>Graph</h2>
@if (count($nodes) < $workflow->nodes)
  <p class="muted">The first {{ number_format(count($nodes)) }} of its {{ number_format($workflow->nodes) }} nodes, in the order they were declared.</p>
@endif
<div class="wf-graph-box">{!! $graph !!}</div>
<p class="muted legend">@foreach (array_keys(\Drover\Dashboard\Workflows\GraphSvg::COLOURS) as $state)<span class="badge st-{{ $state }}">{{ $state }}</span> @endforeach — each box links to its node below; a thick border is a sub-workflow.</p>

<h2>Nodes</h2>
<table class="wf-nodes">
  <tr><th>Node</th><th>State</th><th>Waits for</th><th>Released</th><th>Ended</th><th>Duration</th><th class="n">Steps done</th><th>Progress</th><th>Results</th></tr>
  @foreach ($nodes as $n)
    <tr id="{{ $n->anchor }}" class="wf-node-row" data-node="{{ $n->name }}" data-state="{{ $n->state }}">
      <td><b>{{ $n->name }}</b>
        @if ($n->sub_wf !== null)<br><a class="sub-workflow" href="{{ route('drover.workflow', $n->sub_wf) }}">sub-workflow #{{ $n->sub_wf }}{{ $n->sub ? ' ' . $n->sub->name . ' (' . $n->sub->state . ')' : '' }}</a>@endif
        @if ($n->deps)<br><span class="muted">after {{ implode(', ', $n->deps) }}</span>@endif
        @if ($n->waits)<br><span class="muted">{{ $n->waits }}</span>@endif
        @if ($n->condition)<br><span class="muted">{{ $n->condition }}</span>@endif
        @if ($n->on_failure === 'continue')<br><span class="muted">its failure lets the rest go on</span>@endif
      </td>
      <td><span class="badge st-{{ $n->state }}">{{ $n->state }}</span>@if ($n->cause)<br><span class="muted cause">{{ $n->cause }}</span>@endif</td>
      <td class="waiting-for">@if ($n->waiting_for === 'its time' && $n->due_at)its time: due {!! $ago($n->due_at) !!}@elseif ($n->waiting_for){{ $n->waiting_for }}@if ($n->state === 'waiting' && $operate && $live) <a class="send-waited-signal" href="{{ route('drover.workflow.signal-form', [$workflow->id, 'name' => $n->wait_signal]) }}">send it…</a>@endif @else<span class="muted">–</span>@endif</td>
      <td>{!! $ago($n->released_at) !!}</td>
      <td>{!! $ago($n->ended_at) !!}</td>
      <td>{{ $n->run_secs === null ? '–' : \Drover\Dashboard\HumanTime::duration($n->run_secs) . ($n->ended_at === null ? ' so far' : '') }}</td>
      <td class="n steps">{{ number_format($n->completed) }} / {{ number_format($n->total) }}
        @if ($n->failed > 0)<br><span class="badge bad">{{ number_format($n->failed) }} failed</span>@endif
        @if ($n->pending + $n->queued + $n->cancelled + $n->skipped > 0)<br><span class="muted">@if ($n->queued){{ number_format($n->queued) }} queued @endif @if ($n->pending){{ number_format($n->pending) }} not released @endif @if ($n->cancelled){{ number_format($n->cancelled) }} cancelled @endif @if ($n->skipped){{ number_format($n->skipped) }} skipped @endif</span>@endif
      </td>
      <td>@if ($n->done_share !== null)<span class="progress" title="{{ (int) floor($n->done_share * 100) }}% of its steps done"><span style="width: {{ (int) floor($n->done_share * 100) }}%"></span></span>@endif
        @if ($n->running > 0)<br><a href="#{{ $n->anchor }}-steps">{{ number_format($n->running) }} running</a>@endif</td>
      <td>@if ($n->results > 0){{ number_format($n->results) }} · {{ $bytes($n->result_bytes) }}@else<span class="muted">–</span>@endif</td>
    </tr>
  @endforeach
</table>

@foreach ($nodes as $n)
  @if ($n->running_steps || $n->failed_steps)
    <h2 id="{{ $n->anchor }}-steps">Node “{{ $n->name }}”</h2>
    @if ($n->running_steps)
      <h3 class="wf-steps">Running ({{ number_format($n->running) }}{{ $n->running > count($n->running_steps) ? ', the first ' . count($n->running_steps) . ' listed' : '' }})</h3>
      <table class="wf-running" data-node="{{ $n->name }}">
        <tr><th>Job</th><th class="n">Member</th><th class="n">Attempt</th><th>Progress</th><th>Reported</th><th>Lease until</th></tr>
        @foreach ($n->running_steps as $s)
          <tr class="running-step" data-job="{{ $s->id }}"><td><a href="{{ route('drover.job', $s->id) }}">#{{ $s->id }}</a></td><td class="n">{{ $s->member }}</td>
            <td class="n">{{ $s->attempts }}{{ $s->max_attempts ? ' of ' . $s->max_attempts : '' }}</td>
            <td>@if ($s->percent !== null)<span class="progress"><span style="width: {{ (int) $s->percent }}%"></span></span> {{ (int) $s->percent }}%@if ($s->note) — {{ $s->note }}@endif @else<span class="muted">not reported</span>@endif</td>
            <td>{!! $ago($s->progress_at) !!}</td><td>{!! $ago($s->lease_expires_at) !!}</td></tr>
        @endforeach
      </table>
    @endif
    @if ($n->failed_steps)
      <h3 class="wf-steps">Failed ({{ number_format($n->failed) }}{{ $n->failed > count($n->failed_steps) ? ', the first ' . count($n->failed_steps) . ' listed' : '' }})</h3>
      <table class="wf-failed" data-node="{{ $n->name }}">
        <tr><th>Job</th><th class="n">Member</th><th>Failed</th><th>Error</th><th></th></tr>
        @foreach ($n->failed_steps as $s)
          <tr class="failed-step" data-job="{{ $s->id }}"><td>{{ $s->id }}</td><td class="n">{{ $s->member }}</td><td>{!! $ago($s->ended_at) !!}</td>
            <td>{{ \Illuminate\Support\Str::limit($s->shown_error, 200) }}@if ($s->failed_key) <a href="{{ route('drover.failed-job', $s->failed_key) }}">its failed job</a>@endif</td>
            <td>@if ($operate && $retryable)<form class="inline" method="post" action="{{ route('drover.workflow.retry-step', [$workflow->id, $s->id]) }}">@csrf<button type="submit" class="retry-step">Retry</button></form>@endif</td></tr>
        @endforeach
      </table>
    @endif
  @endif
@endforeach
@endsection
