@extends('drover::layout')
@section('title', 'Action ' . $action->id)
@section('content')
@php($ago = fn ($t) => \Drover\Dashboard\HumanTime::html($t))
@php($preview = is_array($action->target['preview'] ?? null) ? $action->target['preview'] : null)
<h1>Action {{ $action->id }}: {{ $action->verb }}</h1>
<table class="action">
  <tr><th>State</th><td><span id="state" class="badge {{ $action->state === 'done' ? 'ok' : ($action->state === 'failed' ? 'bad' : 'warn') }}">{{ $action->state }}</span>
    @if ($action->state === 'requested') <span class="muted">waiting for a drover worker on {{ $where }}</span>@endif</td></tr>
  <tr><th>Who</th><td>{{ $action->actor }}@if ($action->source) <span class="muted">from {{ $action->source }}</span>@endif</td></tr>
  <tr><th>On</th><td>{{ $action->described }}
    @if (isset($action->target['search']))
      @php($again = array_filter($action->target['search'], fn ($v) => $v !== \Drover\Dashboard\Redaction::WITHHELD))
      · <a href="{{ route('drover.search', $again) }}">search again</a>@if (count($again) < count($action->target['search'])) <span class="muted">(without its withheld text filters)</span>@endif
    @endif</td></tr>
  <tr><th>Requested</th><td>{!! $ago($action->requested_at) !!}</td></tr>
  <tr><th>Finished</th><td>{!! $ago($action->finished_at) !!}</td></tr>
  @if ($preview !== null)
    <tr><th>Previewed</th><td id="previewed">{{ \Drover\Http\Controllers\ActionsController::counted($preview['count'] ?? null, (bool) ($preview['exact'] ?? false)) }} as of {{ $preview['at'] ?? '?' }} (UTC)</td></tr>
  @elseif ($action->matched !== null || isset($action->target['search']))
    <tr><th>Matched when confirmed</th><td class="n-left">{{ $action->matched === null ? 'more than counted' : number_format($action->matched) }}</td></tr>
  @endif
  <tr><th>Done</th><td id="acted">{{ number_format($action->acted) }}</td></tr>
  <tr><th>Passed over</th><td id="passed">{{ number_format($action->passed) }} <span class="muted">previewed, but a worker started them or they went as the action reached them</span></td></tr>
  @if ($preview !== null)
    <tr><th>Changed since the preview</th><td id="changed">{{ number_format((int) ($preview['changed'] ?? 0)) }} <span class="muted">match now but did not when previewed (due, released or changed since): not touched</span></td></tr>
    @if (($preview['exact'] ?? false) && is_int($preview['count'] ?? null))
      <tr><th>Beyond the preview</th><td id="beyond">nothing: {{ number_format($action->acted) }} of the {{ number_format($preview['count']) }} previewed were acted on{{ $action->state === 'done' && $preview['count'] - $action->acted - $action->passed > 0 ? ', ' . number_format($preview['count'] - $action->acted - $action->passed) . ' no longer matched' : '' }}</td></tr>
    @endif
  @endif
  <tr><th>Outcome</th><td id="outcome">{{ $action->outcome ?? '–' }}</td></tr>
</table>
@if ($keys)
  <h2>Jobs it settled{{ count($keys) >= 1000 ? ' (the first 1,000)' : '' }}</h2>
  <p class="keys">{{ implode(', ', $keys) }}</p>
@endif
@endsection
