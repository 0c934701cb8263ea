@extends('drover::layout')
@section('title', 'Groups')
@section('content')
<h1>Ordered groups</h1>
<p class="muted">Jobs with a group (onGroup(), $messageGroup, messageGroup()) run one at a time per group, in dispatch order. A group exists while it has jobs.</p>
<table class="groups">
  <tr><th>Queue</th><th class="n">Groups with jobs</th><th class="n">Held</th><th class="n">Jobs waiting behind heads</th><th class="n">Oldest head (s)</th></tr>
  @forelse ($queues as $q)
    <tr><td>{{ $q->queue }}</td><td class="n">{{ $q->groups }}</td><td class="n">{{ $q->held }}</td><td class="n">{{ $q->waiting }}</td>
      <td class="n">{{ $q->oldest_head_secs !== null ? number_format((float) $q->oldest_head_secs, 1) : '–' }}</td></tr>
  @empty
    <tr><td colspan="5" class="muted">No group has jobs.</td></tr>
  @endforelse
</table>

<h2>Held groups</h2>
<p class="muted">A job that failed for good under hold stops its group. Retry runs it first; forget lets the group go on without it.</p>
<table class="held">
  <tr><th>Queue</th><th>Group</th><th>Held by</th><th>Error</th><th>Since</th><th class="n">Waiting</th><th></th></tr>
  @forelse ($held as $h)
    <tr class="held-group" data-group="{{ $h->name }}"><td>{{ $h->queue }}</td>
      <td><a href="{{ route('drover.group', ['queue' => $h->queue, 'name' => $h->name]) }}">{{ $h->name }}</a></td>
      <td>@if ($h->held_uuid)<a href="{{ route('drover.failed-job', $h->held_uuid) }}">{{ $h->held_uuid }}</a>@else job {{ $h->held_by }}@endif</td>
      <td>{{ \Illuminate\Support\Str::limit($h->error, 120) }}</td><td>{!! \Drover\Dashboard\HumanTime::html($h->held_at) !!}</td><td class="n">{{ $h->waiting }}</td>
      <td>@if ($h->held_uuid)
        @if ($canOperate ?? false)
        <form class="inline" method="post" action="{{ route('drover.failed.retry', $h->held_uuid) }}">@csrf<button type="submit" class="retry">Retry</button></form>
        <form class="inline" method="post" action="{{ route('drover.failed.forget', $h->held_uuid) }}">@csrf<button type="submit" class="danger forget">Forget</button></form>
        @endif
      @endif</td></tr>
  @empty
    <tr><td colspan="7" class="muted">No group is held.</td></tr>
  @endforelse
</table>

<h2>Longest-waiting heads</h2>
<table class="heads">
  <tr><th>Queue</th><th>Group</th><th>Head</th><th class="n">Waiting behind</th><th>Head since</th></tr>
  @forelse ($oldest as $g)
    <tr><td>{{ $g->queue }}</td><td><a href="{{ route('drover.group', ['queue' => $g->queue, 'name' => $g->name]) }}">{{ $g->name }}</a></td>
      <td><a href="{{ route('drover.job', $g->head) }}">#{{ $g->head }}</a></td><td class="n">{{ $g->waiting }}</td><td>{{ $g->head_since }}</td></tr>
  @empty
    <tr><td colspan="5" class="muted">No group has a head.</td></tr>
  @endforelse
</table>
@endsection
