@extends('drover::layout')
@section('title', 'Job #' . $job->id)
@section('content')
<h1>Job #{{ $job->id }} <span class="muted">{{ $job->display_name }}</span></h1>
<table class="detail">
  <tr><th>Queue</th><td>{{ $job->queue }}</td></tr>
  @if (!empty($job->group))
    <tr><th>Group</th><td><a href="{{ route('drover.group', ['queue' => $job->group->queue, 'name' => $job->group->grp]) }}">{{ $job->group->grp }}</a>
      {{ $job->group->position === null ? '(its head)' : '(waiting behind its head, position ' . $job->group->position . ')' }}</td></tr>
  @endif
  @if (!empty($workflow))
    <tr><th>Workflow</th><td id="job-workflow"><a href="{{ route('drover.workflow', $workflow->wf) }}">#{{ $workflow->wf }} {{ $workflow->name }}</a> ({{ $workflow->state }}), its node “{{ $workflow->node }}”{{ (int) $workflow->member > 0 ? ', member ' . (int) $workflow->member : '' }}</td></tr>
  @endif
  @if (!empty($progress))
    <tr><th>Progress</th><td id="job-progress"><span class="progress"><span style="width: {{ (int) $progress->percent }}%"></span></span> {{ (int) $progress->percent }}%@if ($progress->note !== null && $progress->note !== '') — {{ $progress->note }}@endif <span class="muted">reported {!! \Drover\Dashboard\HumanTime::html($progress->at) !!}</span></td></tr>
  @endif
  @if ($completed)
    <tr><th>Completed</th><td>attempt {{ $completed->attempt }} on {{ $completed->hostname }}, worker pid {{ $completed->worker_pid }}</td></tr>
    <tr><th>Started / finished</th><td>{!! \Drover\Dashboard\HumanTime::html($completed->started_at) !!} → {!! \Drover\Dashboard\HumanTime::html($completed->finished_at) !!}</td></tr>
    <tr><th>Run time</th><td>{{ number_format($completed->runtime_ms, 1) }} ms</td></tr>
    <tr><th>Wait</th><td>{{ $completed->wait_ms !== null ? number_format($completed->wait_ms, 1) . ' ms' : '–' }}</td></tr>
    <tr><th>CPU</th><td>{{ $completed->cpu_ms !== null ? number_format($completed->cpu_ms, 1) . ' ms' : '–' }}</td></tr>
    <tr><th>Peak memory</th><td>{{ $completed->memory_kib !== null ? number_format($completed->memory_kib / 1024, 1) . ' MiB' : '–' }}</td></tr>
  @else
    <tr><th>State</th><td id="job-state">{{ $job->lease_expires_at ? 'running attempt ' . $job->attempts . ' (lease ' . $job->lease_token . ', until ' . $job->lease_expires_at . ')' : 'waiting (available at ' . $job->available_at . ')' }}</td></tr>
    <tr><th>Attempts</th><td>{{ $job->attempts }}{{ isset($job->max_attempts) && $job->max_attempts ? ' of ' . $job->max_attempts : '' }}</td></tr>
    <tr><th>Created</th><td>{!! \Drover\Dashboard\HumanTime::html($job->created_at) !!}</td></tr>
    @if ($job->failure)<tr><th>Note</th><td>{{ $job->failure }}</td></tr>@endif
  @endif
  @if (!empty($stop))
    <tr><th>Stop</th><td id="stop-request">asked by {{ $stop->requested_by }} {!! \Drover\Dashboard\HumanTime::html($stop->requested_at) !!} ({{ $stop->mode }}, then {{ $stop->outcome }})
      @if ($stop->taken_at) — its worker was killed by the master on {{ $stop->taken_on ?? 'a host now gone' }} {!! \Drover\Dashboard\HumanTime::html($stop->taken_at) !!}
      @else — no master has acted yet
      @endif</td></tr>
  @endif
  @php($chain = \Drover\Dashboard\ChainedJobs::of($job->payload_array))
  @if ($chain)<tr><th>Chain</th><td id="chain">then {{ implode(' → ', $chain) }}</td></tr>@endif
  <tr><th>Tags</th><td>@forelse ($job->tags as $tag)<a class="tag" href="{{ route('drover.tags', ['tag' => $tag]) }}">{{ $tag }}</a>@empty<span class="muted">none</span>@endforelse</td></tr>
</table>
@if (!$completed && $job->lease_expires_at && ($canOperate ?? false))
<h2>Stop attempt {{ $job->attempts }}</h2>
<form method="post" action="{{ route('drover.job.stop', $job->id) }}" class="stop">
  @csrf
  {{-- The attempt this page shows: a stop is refused once it has ended, never applied to the next. --}}
  <input type="hidden" name="lease" value="{{ $job->lease_token }}">
  <input type="hidden" name="attempt" value="{{ $job->attempts }}">
  <label><input type="radio" name="mode" value="graceful" checked> Graceful: its own failure path runs (failed(), the failer) in the next worker</label><br>
  <label><input type="radio" name="mode" value="kill"> Kill: no code of the job runs again</label><br>
  <label><input type="radio" name="outcome" value="fail" checked> then fail it</label>
  <label><input type="radio" name="outcome" value="release"> then release it to run again</label><br>
  <button type="submit" class="danger stop-job">Stop job {{ $job->id }}, attempt {{ $job->attempts }}</button>
  <span class="muted">Its master kills the worker running it, wherever it runs, as on a timeout.</span>
</form>
@endif
<h2>Payload</h2>
{{-- Redacted by the repository (Redaction::row): the only payload a page is handed. --}}
<pre class="payload">{{ $job->payload }}</pre>
@endsection
