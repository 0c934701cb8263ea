@extends('drover::layout')
@section('title', 'Audit trail')
@section('content')
@php($ago = fn ($t) => \Drover\Dashboard\HumanTime::html($t))
<h1>Audit trail</h1>
<p class="muted">Every action taken from this dashboard: who, what, on what, when and how it ended. Kept {{ (int) $days > 0 ? (int) $days . ' days' : 'forever' }} (<code>drover.dashboard.audit_days</code>).</p>
<table class="audit">
  <tr><th>#</th><th>When</th><th>Who</th><th>Action</th><th>On</th><th>State</th><th class="n">Jobs</th><th>Outcome</th></tr>
  @forelse ($actions as $a)
    <tr class="audit-row" data-verb="{{ $a->verb }}"><td><a href="{{ route('drover.action', $a->id) }}">{{ $a->id }}</a></td>
      <td>{!! $ago($a->requested_at) !!}</td><td>{{ $a->actor }}@if ($a->source) <span class="muted">{{ $a->source }}</span>@endif</td>
      <td>{{ $a->verb }}</td><td>{{ $a->described }}</td>
      <td><span class="badge {{ $a->state === 'done' ? 'ok' : ($a->state === 'failed' ? 'bad' : 'warn') }}">{{ $a->state }}</span></td>
      <td class="n">{{ number_format($a->acted) }}</td><td>{{ \Illuminate\Support\Str::limit((string) $a->outcome, 140) }}</td></tr>
  @empty
    <tr><td colspan="8" class="muted">No action has been taken.</td></tr>
  @endforelse
</table>
@if ($older)<p><a href="{{ route('drover.actions', ['before' => $older]) }}">Older →</a></p>@endif
@endsection
