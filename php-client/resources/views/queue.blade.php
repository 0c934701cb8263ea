@extends('drover::layout')
@section('title', 'Queue ' . $queue)
@section('content')
<h1>Queue {{ $queue }} @if ($paused)<span class="paused">{{ $pausedFor === null ? 'paused' : 'paused for ' . (int) round($pausedFor) . ' s' }}</span>@endif</h1>
<div class="cards">
  <div class="card"><b><a href="{{ route('drover.search', ['state' => 'pending', 'queue' => $queue]) }}">{{ number_format($counts->pending ?? 0) }}{{ ($counts->pending ?? 0) >= $cap ? '+' : '' }}</a></b>pending @if (($counts->pending ?? 0) >= $cap && $estimate !== null) <span class="muted" title="the table's statistics, as of its last ANALYZE">(≈ {{ number_format($estimate) }} in all)</span>@endif</div>
  <div class="card"><b><a href="{{ route('drover.search', ['state' => 'delayed', 'queue' => $queue]) }}">{{ number_format($counts->delayed ?? 0) }}{{ ($counts->delayed ?? 0) >= $cap ? '+' : '' }}</a></b>delayed</div>
  <div class="card"><b><a href="{{ route('drover.search', ['state' => 'running', 'queue' => $queue]) }}">{{ number_format($counts->running ?? 0) }}</a></b>running</div>
  <div class="card"><b>{{ number_format($counts->oldest_wait ?? 0, 1) }} s</b>oldest wait</div>
  <div class="card"><b><a href="{{ route('drover.search', ['state' => 'failed', 'queue' => $queue]) }}">search</a></b>its failed jobs</div>
</div>
@if ($canOperate ?? false)
  <p>@if ($paused)
    <form class="inline" method="post" action="{{ route('drover.queues.resume') }}">@csrf<input type="hidden" name="queue" value="{{ $queue }}"><button type="submit" class="resume-queue">Resume</button></form>
  @else
    <form class="inline" method="post" action="{{ route('drover.queues.pause') }}">@csrf<input type="hidden" name="queue" value="{{ $queue }}"><button type="submit" class="danger pause-queue">Pause</button></form>
  @endif</p>
@endif
<h2>{{ ucfirst($range->label()) }}, every master</h2>
@include('drover::_range')
<div class="charts" id="charts">@foreach ($charts as $chart){!! $chart !!}@endforeach</div>
@endsection
