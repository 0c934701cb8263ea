@extends('drover::layout')
@section('title', 'Group ' . $group->name)
@section('content')
<h1>Group {{ $group->name }} <span class="muted">queue {{ $group->queue }}</span></h1>
<table class="detail">
  <tr><th>State</th><td>{{ $group->head === null ? 'held by failed job ' . ($group->held_uuid ?? $group->held_by) . ' since ' . $group->held_at : 'head #' . $group->head . ' since ' . $group->head_since }}</td></tr>
  @if ($group->head === null)<tr><th>Error</th><td>{{ $group->held_error }}</td></tr>@endif
  <tr><th>Waiting behind the head</th><td>{{ $group->waiting }}</td></tr>
</table>
<h2>Jobs, in the order they run</h2>
<table class="group-jobs">
  <tr><th>Job</th><th>Class</th><th>State</th><th class="n">Position</th><th>Available at</th><th class="n">Attempts</th></tr>
  @forelse ($jobs as $j)
    <tr class="group-job"><td><a href="{{ route('drover.job', $j->id) }}">#{{ $j->id }}</a></td><td>{{ $j->display_name }}</td><td>{{ $j->state }}</td>
      <td class="n">{{ $j->position ?? '–' }}</td><td>{!! \Drover\Dashboard\HumanTime::html($j->available_at) !!}</td><td class="n">{{ $j->attempts }}</td></tr>
  @empty
    <tr><td colspan="6" class="muted">No job: the group is held and nothing waits behind it.</td></tr>
  @endforelse
</table>
@endsection
