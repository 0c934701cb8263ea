@extends('drover::layout', ['refresh' => config('drover.dashboard.refresh', 10)])
@section('title', 'Completed jobs')
@section('content')
<h1>Recently completed</h1>
@if ($history <= 0 && count($jobs) === 0)
  <p class="muted">The completed-job history is off: set <code>drover.metrics.history</code> to the minutes to keep (docs/metrics.md).</p>
@endif
<table class="completed">
  <tr><th>Job</th><th>Class</th><th>Queue</th><th>Finished</th><th class="n">Run time (ms)</th><th class="n">Wait (ms)</th><th class="n">CPU (ms)</th><th class="n">Peak MiB</th><th>Host / pid</th><th>Tags</th></tr>
  @forelse ($jobs as $job)
    <tr><td><a href="{{ route('drover.completed-job', [$job->id, $job->attempt]) }}">#{{ $job->id }}</a></td>
      <td><a href="{{ route('drover.class', ['class' => $job->class]) }}">{{ $job->class }}</a></td>
      <td>{{ $job->queue }}</td><td>{!! \Drover\Dashboard\HumanTime::html($job->finished_at) !!}</td>
      <td class="n">{{ number_format($job->runtime_ms, 1) }}</td>
      <td class="n">{{ $job->wait_ms !== null ? number_format($job->wait_ms, 1) : '–' }}</td>
      <td class="n">{{ $job->cpu_ms !== null ? number_format($job->cpu_ms, 1) : '–' }}</td>
      <td class="n">{{ $job->memory_kib !== null ? number_format($job->memory_kib / 1024, 1) : '–' }}</td>
      <td>{{ $job->hostname }} / {{ $job->worker_pid }}</td>
      <td>@foreach ($job->tags as $tag)<a class="tag" href="{{ route('drover.tags', ['tag' => $tag]) }}">{{ $tag }}</a>@endforeach</td></tr>
  @empty
    <tr><td colspan="10" class="muted">No completed job in the history.</td></tr>
  @endforelse
</table>
@endsection
