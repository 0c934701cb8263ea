@extends('drover::layout')
@section('title', 'Tags')
@section('content')
<h1>Tags</h1>
<form method="get" action="{{ route('drover.tags') }}">
  <input type="search" name="tag" value="{{ $tag }}" placeholder="App\Models\User:42" size="40" aria-label="tag">
  <button type="submit">Search</button>
</form>
<p class="muted">A job's tags are its <code>tags()</code>, or the Eloquent models among its properties, as Horizon's.</p>
@if ($found !== null)
  @foreach (['pending', 'delayed', 'running'] as $kind)
    <h2>{{ ucfirst($kind) }} ({{ count($found[$kind]) }})</h2>
    @include('drover::_jobs_table', ['jobs' => $found[$kind], 'kind' => $kind])
  @endforeach
  <h2>Completed ({{ count($found['completed']) }})</h2>
  <table class="completed">
    <tr><th>Job</th><th>Class</th><th>Finished</th><th class="n">Run time (ms)</th></tr>
    @forelse ($found['completed'] as $job)
      <tr><td><a href="{{ route('drover.completed-job', [$job->id, $job->attempt]) }}">#{{ $job->id }}</a></td><td>{{ $job->class }}</td><td>{{ $job->finished_at }}</td><td class="n">{{ number_format($job->runtime_ms, 1) }}</td></tr>
    @empty
      <tr><td colspan="4" class="muted">None.</td></tr>
    @endforelse
  </table>
  <h2>Failed ({{ count($found['failed']) }})</h2>
  <table class="failed">
    <tr><th>Job</th><th>Class</th><th>Failed at</th></tr>
    @forelse ($found['failed'] as $f)
      <tr><td><a href="{{ route('drover.failed-job', $f->key) }}">{{ $f->key }}</a></td><td>{{ $f->display_name }}</td><td>{{ $f->failed_at }}</td></tr>
    @empty
      <tr><td colspan="3" class="muted">None.</td></tr>
    @endforelse
  </table>
@endif
@endsection
