@extends('drover::layout')
@section('title', 'Action ' . $action->id)
@section('content')
@php($ago = fn ($t) => \Drover\Dashboard\HumanTime::html($t))
<h1>Action {{ $action->id }}: {{ $action->verb }}</h1>
<table class="action">
  <tr><th>State</th><td><span id="state" class="badge {{ $action->state === 'done' ? 'ok' : ($action->state === 'failed' ? 'bad' : 'warn') }}">{{ $action->state }}</span>
    @if ($action->state === 'requested') <span class="muted">waiting for a drover worker on {{ $where }}</span>@endif</td></tr>
  <tr><th>Who</th><td>{{ $action->actor }}@if ($action->source) <span class="muted">from {{ $action->source }}</span>@endif</td></tr>
  <tr><th>On</th><td>{{ $action->described }}
    @if (isset($action->target['search'])) · <a href="{{ route('drover.search', $action->target['search']) }}">search again</a>@endif</td></tr>
  <tr><th>Requested</th><td>{!! $ago($action->requested_at) !!}</td></tr>
  <tr><th>Finished</th><td>{!! $ago($action->finished_at) !!}</td></tr>
  @if ($action->matched !== null || isset($action->target['search']))<tr><th>Matched when confirmed</th><td class="n-left">{{ $action->matched === null ? 'more than counted' : number_format($action->matched) }}</td></tr>@endif
  <tr><th>Done</th><td id="acted">{{ number_format($action->acted) }}</td></tr>
  <tr><th>Passed over</th><td id="passed">{{ number_format($action->passed) }}</td></tr>
  <tr><th>Outcome</th><td id="outcome">{{ $action->outcome ?? '–' }}</td></tr>
</table>
@if ($keys)
  <h2>Jobs it settled{{ count($keys) >= 1000 ? ' (the first 1,000)' : '' }}</h2>
  <p class="keys">{{ implode(', ', $keys) }}</p>
@endif
@endsection
