@extends('drover::layout', ['refresh' => config('drover.dashboard.refresh', 5)])
@section('title', ucfirst($kind) . ' jobs')
@section('content')
<h1>Jobs</h1>
<p>
  @foreach (['pending', 'delayed', 'running'] as $k)
    <a href="{{ route('drover.jobs', $k) }}" class="badge {{ $k === $kind ? 'ok' : '' }}">{{ ucfirst($k) }}</a>
  @endforeach
</p>
@include('drover::_jobs_table', ['jobs' => $jobs, 'kind' => $kind])
@endsection
