@extends('drover::layout')
@section('title', 'Workflows')
@section('content')
@php($ago = fn ($t) => \Drover\Dashboard\HumanTime::html($t))
<h1>Workflows</h1>
<form class="search" method="get" action="{{ route('drover.workflows') }}">
  <label title="names starting with this, exactly (case-sensitive)">Name <input name="name" value="{{ $input['name'] ?? '' }}" size="24" placeholder="import-"></label>
  <label>State <select name="state">
    <option value="">any</option>
    @foreach (\Drover\Dashboard\Workflows\WorkflowFilter::STATES as $s)
      <option value="{{ $s }}" {{ ($input['state'] ?? '') === $s ? 'selected' : '' }}>{{ $s }}</option>
    @endforeach
  </select></label>
  <label title="created within the last … (30m, 24h, 7d)">Created within <select name="within">
    <option value="">any time</option>
    @foreach (\Drover\Dashboard\Workflows\WorkflowFilter::AGES as $value => $words)
      <option value="{{ $value }}" {{ ($input['within'] ?? '') === $value ? 'selected' : '' }}>{{ $words }}</option>
    @endforeach
    @if (($input['within'] ?? '') !== '' && !array_key_exists($input['within'], \Drover\Dashboard\Workflows\WorkflowFilter::AGES))
      <option value="{{ $input['within'] }}" selected>the last {{ $input['within'] }}</option>
    @endif
  </select></label>
  <button type="submit" class="search">Search</button>
  <a href="{{ route('drover.workflows') }}">Clear</a>
</form>
@if ($problems)
  <div class="problems" id="problems">@foreach ($problems as $p)<div>{{ $p }}</div>@endforeach</div>
@else
  <p class="muted" id="described">{{ $filter->describe() }}, newest first.@if (request()->query('after')) <a href="{{ route('drover.workflows', $filter->query()) }}">Newest →</a>@endif</p>
  <table class="workflows">
    <tr><th>#</th><th>Name</th><th>State</th><th class="n">Steps done</th><th>Created</th><th>Duration</th></tr>
    @forelse ($rows as $w)
      <tr class="workflow-row" data-id="{{ $w->id }}" data-state="{{ $w->state }}">
        <td><a href="{{ route('drover.workflow', $w->id) }}">{{ $w->id }}</a></td>
        <td><a href="{{ route('drover.workflow', $w->id) }}">{{ $w->name }}</a>@if ($w->parent !== null) <span class="muted">sub-workflow of <a href="{{ route('drover.workflow', $w->parent) }}">#{{ $w->parent }}</a> ({{ $w->parent_node }})</span>@endif</td>
        <td><span class="badge st-{{ $w->state }}">{{ $w->state }}</span></td>
        <td class="n steps">{{ number_format($w->steps_done) }} / {{ number_format($w->steps) }}@if ($w->steps_failed > 0) <span class="badge bad">{{ number_format($w->steps_failed) }} failed</span>@endif</td>
        <td>{!! $ago($w->created_at) !!}</td>
        <td>{{ $w->started_at === null ? '–' : \Drover\Dashboard\HumanTime::duration((float) $w->run_secs) . ($w->finished_at === null ? ' so far' : '') }}</td>
      </tr>
    @empty
      <tr><td colspan="6" class="muted">{{ $filter->any() ? 'No workflow matches.' : 'No workflow has been dispatched (Drover::workflow(…)->dispatch(), docs/workflows.md).' }}</td></tr>
    @endforelse
  </table>
  @if ($next !== null)
    <p><a id="next" href="{{ route('drover.workflows', $filter->query() + ['after' => $next]) }}">Older {{ \Drover\Dashboard\Limits::PAGE }} →</a></p>
  @endif
@endif
@endsection
