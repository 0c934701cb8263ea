@extends('drover::layout', ['refresh' => config('drover.dashboard.refresh', 30)])
@section('title', $class === '' ? 'Jobs without a class' : $class)
@section('content')
<h1>{{ $class === '' ? '(no displayName)' : $class }} <span class="muted">{{ $range->label() }}, every master</span></h1>
@include('drover::_range')
<p><a href="{{ route('drover.search', ['state' => 'failed', 'class' => $class]) }}">Its failed jobs</a> · <a href="{{ route('drover.search', ['state' => 'pending', 'class' => $class]) }}">its pending jobs</a></p>
<div class="charts">
  @foreach ($charts as $chart){!! $chart !!}@endforeach
</div>
@if ($range === \Drover\Dashboard\Range::Hour)
<h2>Minutes</h2>
<table class="minutes">
  <tr><th>Minute (UTC)</th><th class="n">Completed</th><th class="n">Failed</th><th class="n">Released</th><th class="n">Run time p50 / p95 (ms)</th><th class="n">Wait p50 / p95 (ms)</th><th class="n">CPU mean (ms)</th><th class="n">Peak MiB</th></tr>
  @forelse (array_reverse($minutes) as $m)
    <tr><td>{{ gmdate('Y-m-d H:i', $m['minute']) }}</td>
      <td class="n">{{ $m['completed'] }}</td><td class="n">{{ $m['failed'] }}</td><td class="n">{{ $m['released'] }}</td>
      <td class="n">{{ number_format($m['runtime']->quantile(0.5) ?? 0, 1) }} / {{ number_format($m['runtime']->quantile(0.95) ?? 0, 1) }}</td>
      <td class="n">{{ number_format($m['wait']->quantile(0.5) ?? 0, 1) }} / {{ number_format($m['wait']->quantile(0.95) ?? 0, 1) }}</td>
      <td class="n">{{ $m['cpu']->mean() !== null ? number_format($m['cpu']->mean(), 1) : '–' }}</td>
      <td class="n">{{ $m['memory']->max() !== null ? number_format($m['memory']->max() / 1024, 1) : '–' }}</td></tr>
  @empty
    <tr><td colspan="8" class="muted">No job of this class ran in the last hour.</td></tr>
  @endforelse
</table>
@endif
@endsection
