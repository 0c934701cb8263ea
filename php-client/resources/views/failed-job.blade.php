@extends('drover::layout')
@section('title', 'Failed job ' . $failed->key)
@section('content')
<h1>Failed job {{ $failed->key }} <span class="muted">{{ $failed->display_name }}</span></h1>
<p>
  @if ($canOperate ?? false)
  <form class="inline" method="post" action="{{ route('drover.failed.retry', $failed->key) }}">@csrf<button type="submit" class="retry">Retry</button></form>
  <form class="inline" method="post" action="{{ route('drover.failed.forget', $failed->key) }}">@csrf<button type="submit" class="danger forget">Forget</button></form>
  @endif
</p>
<table class="detail">
  <tr><th>Connection / queue</th><td>{{ $failed->connection }} / {{ $failed->queue }}</td></tr>
  <tr><th>Failed at</th><td>{!! \Drover\Dashboard\HumanTime::html($failed->failed_at) !!}</td></tr>
  <tr><th>Tags</th><td>@forelse ($failed->tags as $tag)<a class="tag" href="{{ route('drover.tags', ['tag' => $tag]) }}">{{ $tag }}</a>@empty<span class="muted">none</span>@endforelse</td></tr>
</table>
<h2>Exception</h2>
<pre class="exception">{{ $failed->exception }}</pre>
<h2>Payload</h2>
<pre class="payload">{{ $failed->payload }}</pre>
@endsection
