@extends('drover::layout')
@section('title', 'Confirm')
@section('content')
@php([$n, $exact] = $count)
<h1>{{ $verb->label() }}{{ $to !== null ? ' to ' . $to : '' }}</h1>
<p id="preview">This will {{ strtolower($verb->label()) }}{{ $to !== null ? " (to queue $to)" : '' }}
  <b>{{ \Drover\Http\Controllers\ActionsController::counted($n, $exact) }}</b>: {{ $filter->describe() }}.</p>
<p class="muted" id="preview-bound">It acts on what this preview matched, as of {{ $preview->at }} (UTC), and on nothing else: a job that matches
  later — dispatched after this page, a delayed job that falls due, a running job released back, a job changed since — is not touched, and the
  action's page counts it. It runs in the background, {{ \Drover\Dashboard\Limits::ACTION_BATCH }} jobs per transaction; a job a worker starts
  meanwhile is passed over, never {{ $verb->value === 'move' ? 'moved' : 'removed' }} under it. The action is recorded in the audit trail with your
  name{{ $filter->has('text') || $filter->has('exception') ? ' (its text filters withheld: the trail shows them as ' . \Drover\Dashboard\Redaction::WITHHELD . ')' : '' }}.
  Confirm within {{ intdiv(\Drover\Dashboard\Actions\Preview::LIFETIME, 60) }} minutes.</p>
<form method="post" action="{{ route('drover.actions.store') }}">
  @csrf
  <input type="hidden" name="preview" value="{{ $token }}">
  <button type="submit" class="danger confirm">Yes, {{ strtolower($verb->label()) }}</button>
  <a href="{{ route('drover.search', $filter->query()) }}">Cancel</a>
</form>
@endsection
