@extends('drover::layout')
@section('title', 'Confirm')
@section('content')
@php([$n, $exact] = $count)
<h1>{{ $verb->label() }}{{ $to !== null ? ' to ' . $to : '' }}</h1>
<p id="preview">This will {{ strtolower($verb->label()) }}{{ $to !== null ? " (to queue $to)" : '' }}
  <b>{{ \Drover\Http\Controllers\ActionsController::counted($n, $exact) }}</b>: {{ $filter->describe() }}.</p>
<p class="muted">It runs in the background, {{ \Drover\Dashboard\Limits::ACTION_BATCH }} jobs per transaction, on the jobs that exist now
  — not on those dispatched after you confirm. A job a worker starts meanwhile is passed over, never {{ $verb->value === 'move' ? 'moved' : 'removed' }} under it.
  The action is recorded in the audit trail with your name.</p>
<form method="post" action="{{ route('drover.actions.store') }}">
  @csrf
  @foreach ($filter->query() as $k => $v)<input type="hidden" name="{{ $k }}" value="{{ $v }}">@endforeach
  <input type="hidden" name="verb" value="{{ $verb->value }}">
  @if ($to !== null)<input type="hidden" name="to" value="{{ $to }}">@endif
  <button type="submit" class="danger confirm">Yes, {{ strtolower($verb->label()) }}</button>
  <a href="{{ route('drover.search', $filter->query()) }}">Cancel</a>
</form>
@endsection
