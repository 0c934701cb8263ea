@extends('drover::layout', ['refresh' => $batch->finished() ? 0 : config('drover.dashboard.refresh', 10)])
@section('title', 'Batch ' . $batch->name)
@section('content')
@php($ago = fn ($t) => \Drover\Dashboard\HumanTime::html($t))
<h1>Batch {{ $batch->name ?: $batch->id }}</h1>
<table class="batch-detail">
  <tr><th>Id</th><td>{{ $batch->id }}</td></tr>
  <tr><th>Jobs</th><td id="batch-counts">{{ $batch->totalJobs }} in all, {{ $batch->pendingJobs }} pending, {{ $batch->failedJobs }} failed — {{ $batch->progress() }}% done</td></tr>
  <tr><th>Created</th><td>{!! $ago($batch->createdAt) !!}</td></tr>
  <tr><th>State</th><td id="batch-state">{{ $batch->cancelled() ? 'cancelled' : ($batch->finished() ? 'finished' : 'running') }}@if ($batch->cancelledAt) {!! $ago($batch->cancelledAt) !!}@elseif ($batch->finishedAt) {!! $ago($batch->finishedAt) !!}@endif</td></tr>
  <tr><th>Its jobs</th><td><a href="{{ route('drover.search', ['state' => 'pending', 'batch' => $batch->id]) }}">waiting</a> · <a href="{{ route('drover.search', ['state' => 'running', 'batch' => $batch->id]) }}">running</a> · <a href="{{ route('drover.search', ['state' => 'failed', 'batch' => $batch->id]) }}">failed</a></td></tr>
</table>
@if ($canOperate ?? false)
  <p>
  @if (!$batch->cancelled() && !$batch->finished())
    <form class="inline" method="post" action="{{ route('drover.batch.cancel', $batch->id) }}">@csrf<button type="submit" class="danger cancel-batch">Cancel the batch</button></form>
  @endif
  @if ($batch->failedJobs > 0)
    <form class="inline" method="post" action="{{ route('drover.batch.retry', $batch->id) }}">@csrf<button type="submit" class="retry-batch">Retry its failed jobs</button></form>
  @endif
  </p>
@endif
<h2>Failed jobs ({{ count($batch->failedJobIds) }})</h2>
<p class="failed-ids">@forelse ($batch->failedJobIds as $failed)<a href="{{ route('drover.search', ['state' => 'failed', 'text' => $failed]) }}">{{ $failed }}</a> @empty<span class="muted">None.</span>@endforelse</p>
@endsection
