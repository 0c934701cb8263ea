@extends('drover::layout', ['refresh' => config('drover.dashboard.refresh', 10)])
@section('title', 'Batches')
@section('content')
<h1>Batches</h1>
@if ($problem)<p class="muted">{{ $problem }}</p>@endif
<table class="batches">
  <tr><th>Batch</th><th>Name</th><th class="n">Jobs</th><th class="n">Pending</th><th class="n">Failed</th><th class="n">Progress</th><th>Created</th><th>Finished</th></tr>
  @forelse ($batches as $b)
    <tr class="batch"><td><a href="{{ route('drover.batch', $b->id) }}">{{ $b->id }}</a></td><td>{{ $b->name }}</td><td class="n">{{ $b->totalJobs }}</td><td class="n">{{ $b->pendingJobs }}</td><td class="n">{{ $b->failedJobs }}</td>
      <td class="n">{{ $b->progress() }}%</td><td>{{ $b->createdAt }}</td>
      <td>{{ $b->cancelledAt ? 'cancelled ' . $b->cancelledAt : ($b->finishedAt ?? '–') }}</td></tr>
  @empty
    <tr><td colspan="8" class="muted">No batches.</td></tr>
  @endforelse
</table>
@endsection
