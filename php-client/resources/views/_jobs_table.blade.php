{{-- A list of jobs from drover.jobs: $jobs, $kind --}}
<table class="jobs">
  <tr><th>Job</th><th>Class</th><th>Queue</th><th class="n">Attempts</th><th>{{ $kind === 'running' ? 'Lease until' : ($kind === 'delayed' ? 'Due' : 'Available since') }}</th><th>Tags</th></tr>
  @forelse ($jobs as $job)
    <tr>
      <td><a href="{{ route('drover.job', $job->id) }}">#{{ $job->id }}</a></td>
      <td>@if ($job->display_name !== '')<a href="{{ route('drover.class', ['class' => $job->display_name]) }}">{{ $job->display_name }}</a>@else<span class="muted">–</span>@endif</td>
      <td>{{ $job->queue }}</td>
      <td class="n">{{ $job->attempts }}</td>
      <td>{!! \Drover\Dashboard\HumanTime::html($kind === 'running' ? $job->lease_expires_at : $job->available_at) !!}</td>
      <td>@foreach ($job->tags as $tag)<a class="tag" href="{{ route('drover.tags', ['tag' => $tag]) }}">{{ $tag }}</a>@endforeach</td>
    </tr>
  @empty
    <tr><td colspan="6" class="muted">No {{ $kind }} jobs.</td></tr>
  @endforelse
</table>
