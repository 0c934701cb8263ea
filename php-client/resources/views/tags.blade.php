@extends('drover::layout')
@section('title', 'Tags')
@section('content')
<h1>Tags</h1>
<form method="get" action="{{ route('drover.tags') }}">
  <input type="search" name="tag" value="{{ $tag }}" placeholder="App\Models\User:42" size="40" aria-label="tag">
  <button type="submit">Search</button>
</form>
<p class="muted">A job's tags are its <code>tags()</code>, or the Eloquent models among its properties, as Horizon's. Each state is counted for a moment; its link lists the jobs.</p>
@if ($found !== null)
  <table class="tag-states">
    <tr><th>State</th><th class="n">Jobs tagged {{ $tag }}</th></tr>
    @foreach ($found as $kind => $f)
      @php([$n, $exact] = $f['count'] ?? [null, false])
      <tr class="tag-state" data-state="{{ $kind }}"><td><a href="{{ route('drover.search', $f['query']) }}"><h2 class="inline">{{ $f['state']->label() }} ({{ isset($f['unavailable']) ? 'not searchable' : ($n === null ? 'not counted' : (($exact ? '' : ($n >= \Drover\Dashboard\Limits::SEARCH_COUNT_CAP ? 'more than ' : 'at least ')) . number_format($n))) }})</h2></a></td>
        <td class="n">{{ $f['unavailable'] ?? '' }}</td></tr>
    @endforeach
  </table>
@endif
@endsection
