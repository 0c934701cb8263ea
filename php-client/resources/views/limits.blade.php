@extends('drover::layout')
@section('title', 'Limits')
@section('content')
<h1>Limits</h1>
<p class="muted">Jobs under WithoutOverlapping, RateLimited, LimitConcurrency or LimitRate wait here, unclaimed and without using an attempt, until each of their keys lets them in (docs/limits.md). The keys most waited for first.</p>
<table class="limits">
  <tr><th>Key</th><th class="n">Jobs waiting</th><th class="n">Slots held</th><th class="n">Rate used</th><th class="n">Window ends in (s)</th><th class="n">Oldest due (s)</th></tr>
  @forelse ($keys as $k)
    <tr class="limit-key" data-key="{{ $k->key }}"><td>{{ $k->key }}</td><td class="n">{{ $k->waiting }}</td><td class="n">{{ $k->held }}</td>
      <td class="n">{{ $k->rate_used ?? '–' }}</td>
      <td class="n">{{ $k->window_ends_in_secs !== null ? number_format((float) $k->window_ends_in_secs, 1) : '–' }}</td>
      <td class="n">{{ $k->oldest_wait_secs !== null ? number_format((float) $k->oldest_wait_secs, 1) : '–' }}</td></tr>
  @empty
    <tr><td colspan="6" class="muted">No job waits for a limit.</td></tr>
  @endforelse
</table>

<h2>Fair queues</h2>
<p class="muted">Their workers take the jobs of each key (tenant) in turn (drover.fair).</p>
<ul class="fair">
  @forelse ($fair as $q)
    <li>{{ $q }}</li>
  @empty
    <li class="muted">None.</li>
  @endforelse
</ul>
@endsection
