@extends('drover::layout', ['refresh' => config('drover.dashboard.refresh', 5)])
@section('title', 'Overview')
@section('content')
<h1>Overview</h1>
<div class="cards">
  <div class="card"><b id="hosts">{{ count($nodes) }}</b>master{{ count($nodes) === 1 ? '' : 's' }}</div>
  <div class="card"><b id="workers">{{ $workers }}</b>workers</div>
  <div class="card"><b>{{ number_format(collect($queues)->sum('pending')) }}{{ collect($queues)->contains(fn ($q) => $q->pending >= $cap) ? '+' : '' }}</b>jobs waiting</div>
  <div class="card"><b>{{ number_format(collect($throughput)->sum('per_minute'), 1) }}</b>jobs/min (last hour)</div>
</div>

<h2>Masters</h2>
@forelse ($nodes as $node)
  @php($status = $node->status ?? [])
  <h3 class="master" data-node="{{ $node->id }}">{{ $node->hostname }} <span class="muted">pid {{ $node->pid }} · node {{ $node->id }} · up since {!! \Drover\Dashboard\HumanTime::html($node->started_at) !!} · seen {!! \Drover\Dashboard\HumanTime::html($node->heartbeat_at) !!}</span>
    @php($health = $status['health'] ?? 'unknown')
    <span class="badge {{ $health === 'serving' ? 'ok' : ($health === 'paused' ? 'warn' : 'bad') }}">{{ $health }}</span>
    @if ($node->silent ?? false)<span class="badge bad silent" title="no heartbeat for more than two of its leases: cut off from the database, frozen or gone; what this row says is as of then">silent for {{ (int) round($node->silent_secs) }} s</span>@endif
    @isset($status['master_pss_kib'])<span class="muted"> · master {{ number_format($status['master_pss_kib'] / 1024, 1) }} MiB PSS</span>@endisset
    @if (($canOperate ?? false) && ($node->release ?? null) !== null)
      <form class="inline" method="post" action="{{ route('drover.masters.restart', $node->id) }}">@csrf<button type="submit" class="restart-master" title="re-read config/drover.php and replace its workers one by one">Restart</button></form>
    @endif
  </h3>
  @if (($status['totals']['completed_within'] ?? 0) > 0)<div class="muted completed-within" title="jobs whose completion was written inside their own transaction with their writes (docs/exactly-once.md)">{{ number_format($status['totals']['done'] ?? 0) }} done since start, {{ number_format($status['totals']['completed_within']) }} of them completed within their own transaction ({{ number_format($status['totals']['completed_after_exit'] ?? 0) }} learned from the database after their worker died)</div>@endif
  @if (($status['problems'] ?? []) !== [])<div class="problems master-problems">@foreach ($status['problems'] as $problem)<div>{{ $problem }}</div>@endforeach</div>@endif
  <table class="pools">
    <tr><th>Pool</th><th>Queues</th><th class="n">Processes</th><th>Circuit</th><th class="n">Restarts</th><th>Generation</th><th>Workers</th></tr>
    @foreach ($status['pools'] ?? [] as $pool)
      <tr>
        <td>{{ $pool['name'] }} @if ($pool['paused'] ?? false)<span class="badge warn">paused</span>@endif</td>
        <td>{{ implode(', ', $pool['queues'] ?? []) }}</td>
        <td class="n">{{ $pool['serving'] ?? 0 }} / {{ $pool['processes'] ?? 0 }}
          @php($set = $poolSizes[$node->id][$pool['name']] ?? null)
          @if ($set)<div class="muted pool-size" title="set from the console by {{ $set->requested_by }}; config/drover.php's size holds again at the next reload">set to {{ $set->processes }}: {{ $set->outcome ?? 'not applied yet' }}</div>@endif
          @if (($canOperate ?? false) && ($node->release ?? null) !== null)
            <form class="inline pool-size" method="post" action="{{ route('drover.masters.pool-size', $node->id) }}">@csrf<input type="hidden" name="pool" value="{{ $pool['name'] }}"><input name="processes" size="3" value="{{ $pool['processes'] ?? 0 }}" aria-label="processes"><button type="submit" class="set-pool-size">Set</button></form>
          @endif
        </td>
        <td><span class="badge {{ ($pool['circuit']['state'] ?? '') === 'closed' ? 'ok' : 'bad' }}">{{ $pool['circuit']['state'] ?? '?' }}</span></td>
        <td class="n">{{ $pool['restarts'] ?? 0 }}</td>
        <td>{{ $pool['generation'] ?? 0 }}</td>
        <td>
          <table class="workers">
            <tr><th>PID</th><th>State</th><th>Job</th><th class="n">Done</th><th class="n">PSS MiB</th></tr>
            @foreach ($pool['workers'] ?? [] as $w)
              <tr class="worker"><td>{{ $w['pid'] }}</td><td>{{ $w['state'] }}</td>
                <td>@if ($w['running'] ?? null)<a href="{{ route('drover.job', $w['running']) }}">#{{ $w['running'] }}</a>@else<span class="muted">–</span>@endif</td>
                <td class="n">{{ $w['finished'] ?? 0 }}</td>
                <td class="n">{{ isset($w['pss_kib']) ? number_format($w['pss_kib'] / 1024, 1) : '–' }}</td></tr>
            @endforeach
          </table>
        </td>
      </tr>
    @endforeach
  </table>
@empty
  <p class="muted">No master is running on this database (`php artisan drover`).</p>
@endforelse

<h2>Every queue, {{ $range->label() }}</h2>
@include('drover::_range')
<div class="charts" id="charts">@foreach ($charts as $chart){!! $chart !!}@endforeach</div>

<h2>Queues</h2>
<table class="queues">
  <tr><th>Queue</th><th class="n">Pending</th><th class="n">Delayed</th><th class="n">Running</th><th class="n">Oldest wait (s)</th><th class="n">Jobs/min (1 h)</th><th class="n">Failed (1 h)</th><th class="n">Mean wait (ms)</th><th class="n">Mean run time (ms)</th>@if ($canOperate ?? false)<th></th>@endif</tr>
  @php($byQueue = collect($throughput)->keyBy('name'))
  @foreach (collect($queues)->pluck('queue')->merge($byQueue->keys())->unique()->sort() as $name)
    @php($q = collect($queues)->firstWhere('queue', $name)) @php($t = $byQueue->get($name))
    <tr class="queue" data-queue="{{ $name }}"><td><a href="{{ route('drover.queue', ['queue' => $name]) }}">{{ $name }}</a>@if (array_key_exists($name, $paused ?? [])) <span class="paused">{{ $paused[$name] === null ? 'paused' : 'paused for ' . (int) round($paused[$name]) . ' s' }}</span>@endif</td>
      @php($many = fn ($n) => ($n ?? 0) >= $cap ? number_format($cap) . '+' : number_format($n ?? 0))
      <td class="n"><a href="{{ route('drover.search', ['state' => 'pending', 'queue' => $name]) }}">{{ $many($q->pending ?? 0) }}</a>@if (($q->pending ?? 0) >= $cap && isset($estimates[$name])) <span class="muted" title="the table's statistics, as of its last ANALYZE: pending, delayed and running together">≈ {{ number_format($estimates[$name]) }} in all</span>@endif</td>
      <td class="n"><a href="{{ route('drover.search', ['state' => 'delayed', 'queue' => $name]) }}">{{ $many($q->delayed ?? 0) }}</a></td>
      <td class="n"><a href="{{ route('drover.search', ['state' => 'running', 'queue' => $name]) }}">{{ $q->running ?? 0 }}</a>@if (isset($budgets[$name])) <span class="muted" title="fleet-wide budget (docs/budgets.md)">of {{ $budgets[$name] }}</span>@endif</td>
      <td class="n">{{ number_format($q->oldest_wait ?? 0, 1) }}</td>
      <td class="n">{{ $t ? number_format($t->per_minute, 1) : '–' }}</td>
      <td class="n">{{ $t->failed ?? '–' }}</td>
      <td class="n">{{ $t && $t->wait_ms !== null ? number_format($t->wait_ms, 1) : '–' }}</td>
      <td class="n">{{ $t && $t->runtime_ms !== null ? number_format($t->runtime_ms, 1) : '–' }}</td>
      @if ($canOperate ?? false)<td>
        @if (array_key_exists($name, $paused ?? []))
          <form class="inline" method="post" action="{{ route('drover.queues.resume') }}">@csrf<input type="hidden" name="queue" value="{{ $name }}"><button type="submit" class="resume-queue">Resume</button></form>
        @else
          <form class="inline" method="post" action="{{ route('drover.queues.pause') }}">@csrf<input type="hidden" name="queue" value="{{ $name }}"><button type="submit" class="danger pause-queue">Pause</button></form>
        @endif
      </td>@endif</tr>
  @endforeach
</table>

<h2>Job classes (last hour)</h2>
<table class="classes">
  <tr><th>Class</th><th class="n">Completed</th><th class="n">Failed</th><th class="n">Mean run time (ms)</th><th class="n">Mean CPU (ms)</th><th class="n">Peak memory (MiB)</th></tr>
  @forelse ($classes as $c)
    <tr><td><a href="{{ route('drover.class', ['class' => $c->name]) }}">{{ $c->name === '' ? '(no displayName)' : $c->name }}</a></td>
      <td class="n">{{ $c->completed }}</td><td class="n">{{ $c->failed }}</td>
      <td class="n">{{ $c->runtime_ms !== null ? number_format($c->runtime_ms, 1) : '–' }}</td>
      <td class="n">{{ $c->cpu_ms !== null ? number_format($c->cpu_ms, 1) : '–' }}</td>
      <td class="n">{{ $c->memory_kib !== null ? number_format($c->memory_kib / 1024, 1) : '–' }}</td></tr>
  @empty
    <tr><td colspan="6" class="muted">No job ran in the last hour.</td></tr>
  @endforelse
</table>
@endsection
