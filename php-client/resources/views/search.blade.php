@extends('drover::layout')
@section('title', 'Search')
@section('content')
@php($ago = fn ($t) => \Drover\Dashboard\HumanTime::html($t))
<h1>Search jobs</h1>
<form class="search" method="get" action="{{ route('drover.search') }}">
  <label>State <select name="state">
    @foreach (\Drover\Dashboard\Search\State::cases() as $s)
      <option value="{{ $s->value }}" {{ $s === $state ? "selected" : "" }}>{{ $s->label() }}</option>
    @endforeach
  </select></label>
  @foreach (\Drover\Dashboard\Search\JobFilter::FILTERS as $name => $what)
    {{-- Free-text filters (text, exception) are for those who may act: a match would tell a secret. --}}
    @if (in_array($name, $state->filters(), true) && (($canOperate ?? false) || !in_array($name, \Drover\Dashboard\Redaction::WITHHELD_FILTERS, true)))
      <label title="{{ $what }}">{{ ucfirst($name) }} <input name="{{ $name }}" value="{{ $input[$name] ?? '' }}" size="{{ in_array($name, ['attempts'], true) ? 4 : 16 }}" placeholder="{{ in_array($name, ['since', 'until'], true) ? 'YYYY-MM-DD HH:MM' : '' }}"></label>
    @endif
  @endforeach
  <button type="submit" class="search">Search</button>
  <a href="{{ route('drover.search', ['state' => $state->value]) }}">Clear</a>
</form>
<p class="states">@foreach (\Drover\Dashboard\Search\State::cases() as $s)@php($q = array_intersect_key($input, array_flip($s->filters())))<a class="state {{ $s === $state ? 'on' : '' }}" href="{{ route('drover.search', ['state' => $s->value] + $q) }}">{{ $s->label() }}</a> @endforeach</p>
<p class="muted">Each filter applies to the states it means something in; the time is when the job was {{ $state->timeColumn() }}. The search is in the address: share it.</p>

@if ($problems)
  <div class="problems" id="problems">@foreach ($problems as $p)<div>{{ $p }}</div>@endforeach</div>
@elseif ($unavailable)
  <div class="problems">{{ $unavailable }}</div>
@else
  @php([$n, $exact] = $count)
  <p id="count"><b>@if ($n === null)Not counted: nothing was counted within {{ \Drover\Dashboard\Limits::SEARCH_COUNT_MS }} ms (narrow the search by queue or time)@elseif ($exact){{ number_format($n) }} {{ $n === 1 ? 'job matches' : 'jobs match' }}@elseif ($n >= \Drover\Dashboard\Limits::SEARCH_COUNT_CAP)More than {{ number_format($n) }} jobs match @else At least {{ number_format($n) }} {{ $n === 1 ? 'job matches' : 'jobs match' }} (counted for {{ \Drover\Dashboard\Limits::SEARCH_COUNT_MS }} ms; narrow the search by queue or time for an exact count)@endif</b></p>
  @if (($canOperate ?? false) && $verbs && ($n === null || $n > 0))
    <div class="actions" id="actions">
      @foreach ($verbs as $verb)
        @if ($verb->needsQueue())
          <form class="inline" method="get" action="{{ route('drover.actions.confirm') }}">
            @foreach ($filter->query() as $k => $v)<input type="hidden" name="{{ $k }}" value="{{ $v }}">@endforeach
            <input type="hidden" name="verb" value="{{ $verb->value }}">
            <input name="to" placeholder="queue" size="12" required> <button type="submit" class="verb-{{ $verb->value }}">{{ $verb->label() }}…</button>
          </form>
        @else
          <a class="verb-{{ $verb->value }}" href="{{ route('drover.actions.confirm', $filter->query() + ['verb' => $verb->value]) }}"><button type="button">{{ $verb->label() }} all…</button></a>
        @endif
      @endforeach
    </div>
  @endif
  <table class="results">
    <tr><th>Job</th><th>Class</th><th>Queue</th><th class="n">Attempts</th><th>{{ ucfirst($state->timeColumn()) }}</th>@if (in_array($state->value, ['running', 'completed'], true))<th>Host</th>@endif<th>Tags</th>@if (in_array($state->value, ['failed', 'kept', 'pending', 'delayed'], true))<th>Exception</th>@endif</tr>
    @forelse ($rows as $row)
      <tr class="result" data-key="{{ $row->key }}">
        <td>@if ($state->value === 'failed')<a href="{{ route('drover.failed-job', $row->key) }}">{{ $row->key }}</a>@elseif ($state->value === 'completed')<a href="{{ route('drover.completed-job', [$row->id, $row->attempt]) }}">{{ $row->id }}</a>@elseif ($state->value === 'kept'){{ $row->key }}@else<a href="{{ route('drover.job', $row->id) }}">{{ $row->id }}</a>@endif</td>
        <td>{{ $row->display_name }}</td><td>{{ $row->queue }}</td><td class="n">{{ $row->attempts ?? '–' }}</td>
        <td>{!! $ago($row->at) !!}</td>
        @if (in_array($state->value, ['running', 'completed'], true))<td>{{ $row->host ?? '–' }}</td>@endif
        <td>@foreach ($row->tags as $tag)<a class="tag" href="{{ route('drover.search', ['state' => $state->value, 'tag' => $tag]) }}">{{ $tag }}</a>@endforeach</td>
        @if (in_array($state->value, ['failed', 'kept', 'pending', 'delayed'], true))<td>{{ \Illuminate\Support\Str::limit($row->exception_first_line, 100) }}</td>@endif
      </tr>
    @empty
      <tr><td colspan="8" class="muted">{{ $partial ? 'Nothing found in what could be read within ' . \Drover\Dashboard\Limits::SEARCH_PAGE_MS . ' ms; the rest is not read yet.' : 'No job matches.' }}</td></tr>
    @endforelse
  </table>
  @if ($next !== null && $partial)
    <p id="partial" class="muted">This page read the jobs for {{ \Drover\Dashboard\Limits::SEARCH_PAGE_MS }} ms and shows what it found; the rest are not read yet. <a id="next" href="{{ route('drover.search', $filter->query() + ['after' => $next]) }}">Go on reading →</a></p>
  @elseif ($partial)
    <p id="partial" class="muted">Nothing could be read within {{ \Drover\Dashboard\Limits::SEARCH_PAGE_MS }} ms (pages not in memory yet, or a slow filter). <a href="{{ route('drover.search', $filter->query()) }}">Try again</a>, or narrow the search by queue or time.</p>
  @elseif ($next !== null)
    <p><a id="next" href="{{ route('drover.search', $filter->query() + ['after' => $next]) }}">Next {{ \Drover\Dashboard\Limits::PAGE }} →</a></p>
  @endif
@endif
@endsection
