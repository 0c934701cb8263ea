@extends('drover::layout')
@section('title', 'Schedule')
@section('content')
@php($at = fn ($t) => new \Illuminate\Support\HtmlString(\Drover\Dashboard\HumanTime::html($t)))
<h1>Schedule</h1>
<p class="muted">The application's schedule, run by the drover masters without cron (docs/schedule.md): a task of onOneServer() once per due time across the fleet, any other once per host. A paused task's due times are recorded as skipped on every master; "Run now" runs a task once, on the first master that runs the schedule.</p>
<table class="schedule">
  <tr><th>Task</th><th>When</th><th>Next due</th><th>Latest run</th><th></th></tr>
  @forelse ($tasks as $t)
    <tr class="schedule-task" data-key="{{ $t->key }}">
      <td>{{ $t->summary }}@if ($t->paused) <span class="paused">paused</span>@endif</td>
      <td><code>{{ $t->expression }}</code>{{ $t->repeat ? ' every ' . $t->repeat . 's' : '' }} {{ $t->timezone }}{{ $t->one_server ? ', one server' : '' }}</td>
      <td>{{ $t->next ?? '–' }}</td>
      <td>
        @if ($t->latest)
          <span class="status-{{ $t->latest->status }}">{{ $t->latest->status }}</span>, due {{ $at($t->latest->due_at) }} on {{ $t->latest->host }}@if ($t->latest->reason): {{ $t->latest->reason }}@endif
        @else
          <span class="muted">never run</span>
        @endif
      </td>
      <td>@if ($canOperate ?? false)
        <form class="inline" method="post" action="{{ route('drover.schedule.run-now') }}">@csrf<input type="hidden" name="task" value="{{ $t->key }}"><button type="submit" class="run-now">Run now</button></form>
        @if ($t->paused)
          <form class="inline" method="post" action="{{ route('drover.schedule.resume') }}">@csrf<input type="hidden" name="task" value="{{ $t->key }}"><button type="submit" class="resume">Resume</button></form>
        @else
          <form class="inline" method="post" action="{{ route('drover.schedule.pause') }}">@csrf<input type="hidden" name="task" value="{{ $t->key }}"><button type="submit" class="danger pause">Pause</button></form>
        @endif
      @endif</td>
    </tr>
  @empty
    <tr><td colspan="5" class="muted">The application has no schedule.</td></tr>
  @endforelse
</table>

<h2>Recent runs</h2>
<table class="schedule-runs">
  <tr><th>Task</th><th>Due (UTC)</th><th>Host</th><th>Status</th><th>Started</th><th>Ended</th><th class="n">Exit</th><th>Output (tail)</th></tr>
  @forelse ($recent as $r)
    <tr class="schedule-run" data-status="{{ $r->status }}">
      <td>{{ $r->summary }}</td><td>{{ $at($r->due_at) }}</td><td>{{ $r->host }}</td>
      <td>{{ $r->status }}@if ($r->asked_by)<br><span class="muted">run now, asked by {{ $r->asked_by }}</span>@endif @if ($r->reason)<br><span class="muted">{{ $r->reason }}</span>@endif</td>
      <td>{{ $at($r->started_at) }}</td><td>{{ $at($r->ended_at) }}</td><td class="n">{{ $r->exit_code ?? '–' }}</td>
      <td>@if ($r->output_tail !== null && $r->output_tail !== '')<pre class="output">{{ $r->output_tail }}</pre>@endif</td>
    </tr>
  @empty
    <tr><td colspan="8" class="muted">No run yet.</td></tr>
  @endforelse
</table>
@endsection
