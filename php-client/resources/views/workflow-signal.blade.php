@extends('drover::layout')
@section('title', 'Signal workflow ' . $workflow->name)
@section('content')
<h1>Send a signal to workflow #{{ $workflow->id }} {{ $workflow->name }}</h1>
@if ($problems)
  <div class="problems" id="problems">@foreach ($problems as $p)<div>{{ $p }}</div>@endforeach</div>
@endif
@if (!in_array($workflow->state, ['pending', 'running'], true))
  <p class="problems">It has ended ({{ $workflow->state }}): a signal sent now is not kept.</p>
@endif
<p class="muted">As <code>Drover::signal({{ $workflow->id }}, $name, $data)</code> from the application: the signal is kept (the first of a name), and its nodes waiting for it are released. Its data is JSON the steps read with <code>$this->workflow()->signal($name)</code>.</p>
<form method="post" action="{{ route('drover.workflow.signal', $workflow->id) }}" class="signal">
  @csrf
  <p><label>Name <input name="name" value="{{ $name }}" size="32" maxlength="200" required></label></p>
  <p><label>Data (JSON, or empty for none)<br><textarea name="data" rows="6" cols="72" placeholder='{"by": "ana"}'>{{ $data }}</textarea></label></p>
  <button type="submit" class="send-signal">Send the signal</button>
  <a href="{{ route('drover.workflow', $workflow->id) }}">Back to the workflow</a>
</form>
@endsection
