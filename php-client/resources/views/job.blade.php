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
  @if ($completed)
    <tr><th>Completed</th><td>attempt {{ $completed->attempt }} on {{ $completed->hostname }}, worker pid {{ $completed->worker_pid }}</td></tr>
    <tr><th>Started / finished</th><td>{{ $completed->started_at }} → {{ $completed->finished_at }}</td></tr>
    <tr><th>Run time</th><td>{{ number_format($completed->runtime_ms, 1) }} ms</td></tr>
    <tr><th>Wait</th><td>{{ $completed->wait_ms !== null ? number_format($completed->wait_ms, 1) . ' ms' : '–' }}</td></tr>
    <tr><th>CPU</th><td>{{ $completed->cpu_ms !== null ? number_format($completed->cpu_ms, 1) . ' ms' : '–' }}</td></tr>
    <tr><th>Peak memory</th><td>{{ $completed->memory_kib !== null ? number_format($completed->memory_kib / 1024, 1) . ' MiB' : '–' }}</td></tr>
  @else
    <tr><th>State</th><td>{{ $job->lease_expires_at ? 'running (leased until ' . $job->lease_expires_at . ')' : 'waiting (available at ' . $job->available_at . ')' }}</td></tr>
    <tr><th>Attempts</th><td>{{ $job->attempts }}{{ isset($job->max_attempts) && $job->max_attempts ? ' of ' . $job->max_attempts : '' }}</td></tr>
    <tr><th>Created</th><td>{{ $job->created_at }}</td></tr>
    @if ($job->failure)<tr><th>Note</th><td>{{ $job->failure }}</td></tr>@endif
  @endif
  <tr><th>Tags</th><td>@forelse ($job->tags as $tag)<a class="tag" href="{{ route('drover.tags', ['tag' => $tag]) }}">{{ $tag }}</a>@empty<span class="muted">none</span>@endforelse</td></tr>
</table>
<h2>Payload</h2>
<pre class="payload">{{ \Drover\Dashboard\Redaction::fromConfig()->show($job->payload_array, (string) $job->payload) }}</pre>
@endsection
