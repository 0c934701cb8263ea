@extends('drover::layout')
@section('title', 'Failed jobs')
@section('content')
<h1>Failed jobs</h1>
<p class="muted"><a href="{{ route('drover.search', ['state' => 'failed']) }}">Search failed jobs</a> to find them by class, queue, time or exception, and act on all that match.</p>
<table class="failed">
  <tr><th>Job</th><th>Class</th><th>Queue</th><th>Failed at</th><th>Exception</th><th></th></tr>
  @forelse ($failed as $f)
    <tr class="failed-job" data-key="{{ $f->key }}"><td><a href="{{ route('drover.failed-job', $f->key) }}">{{ $f->key }}</a></td>
      <td>{{ $f->display_name }}</td><td>{{ $f->queue }}</td><td>{!! \Drover\Dashboard\HumanTime::html($f->failed_at) !!}</td>
      <td>{{ \Illuminate\Support\Str::limit($f->exception_first_line, 120) }}</td>
      <td>@if ($canOperate ?? false)
        <form class="inline" method="post" action="{{ route('drover.failed.retry', $f->key) }}">@csrf<button type="submit" class="retry">Retry</button></form>
        <form class="inline" method="post" action="{{ route('drover.failed.forget', $f->key) }}">@csrf<button type="submit" class="danger forget">Forget</button></form>
      @endif</td></tr>
  @empty
    <tr><td colspan="6" class="muted">No failed jobs.</td></tr>
  @endforelse
</table>
@endsection
