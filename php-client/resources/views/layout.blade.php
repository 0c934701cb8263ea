<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
@if (!empty($refresh))<meta http-equiv="refresh" content="{{ (int) $refresh }}">@endif
<title>drover · @yield('title')</title>
<style>
  body { font: 14px/1.45 system-ui, -apple-system, "DejaVu Sans", sans-serif; margin: 0; color: #111827; background: #f9fafb; }
  header { background: #111827; color: #f9fafb; padding: 10px 24px; display: flex; gap: 20px; align-items: center; flex-wrap: wrap; }
  header a { color: #d1d5db; text-decoration: none; } header a.on, header a:hover { color: #fff; }
  header strong { font-size: 16px; margin-right: 12px; }
  main { padding: 16px 24px; max-width: 1200px; }
  h1 { font-size: 20px; margin: 8px 0 16px; } h2 { font-size: 16px; margin: 24px 0 8px; } h3.wf-steps { font-size: 14px; margin: 14px 0 6px; }
  table { border-collapse: collapse; width: 100%; background: #fff; border: 1px solid #e5e7eb; }
  th, td { text-align: left; padding: 6px 10px; border-bottom: 1px solid #e5e7eb; vertical-align: top; }
  th { background: #f3f4f6; font-weight: 600; } td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
  .badge { display: inline-block; padding: 1px 8px; border-radius: 9px; font-size: 12px; background: #e5e7eb; }
  .ok { background: #dcfce7; color: #166534; } .warn { background: #fef3c7; color: #92400e; } .bad { background: #fee2e2; color: #991b1b; }
  .tag { display: inline-block; margin: 0 4px 2px 0; padding: 0 6px; border-radius: 4px; background: #e0e7ff; color: #3730a3; font-size: 12px; text-decoration: none; }
  pre { background: #111827; color: #e5e7eb; padding: 12px; overflow: auto; border-radius: 6px; font-size: 12px; max-height: 480px; }
  .muted { color: #6b7280; } .paused { background: #fef3c7; color: #92400e; border-radius: 4px; padding: 0 6px; font-size: 12px; } .flash { background: #dcfce7; border: 1px solid #86efac; padding: 8px 12px; border-radius: 6px; margin-bottom: 12px; }
  .cards { display: flex; gap: 12px; flex-wrap: wrap; } .card { background: #fff; border: 1px solid #e5e7eb; border-radius: 6px; padding: 10px 14px; min-width: 140px; }
  .problems { background: #fee2e2; border: 1px solid #fca5a5; padding: 8px 12px; border-radius: 6px; margin-bottom: 12px; }
  form.search label { display: inline-block; margin: 0 12px 8px 0; } form.search input, form.search select { font: inherit; padding: 3px 6px; }
  .states a { margin-right: 10px; } .states a.on { font-weight: 600; color: #111827; text-decoration: none; }
  .ranges a { margin-right: 10px; } .ranges a.on { font-weight: 600; text-decoration: none; color: #111827; }
  h2.inline { display: inline; font-size: 14px; margin: 0; }
  .card b { display: block; font-size: 20px; } form.inline { display: inline; }
  button { font: inherit; padding: 4px 12px; border-radius: 5px; border: 1px solid #9ca3af; background: #fff; cursor: pointer; }
  button.danger { border-color: #fca5a5; color: #991b1b; }
  svg.chart { background: #fff; border: 1px solid #e5e7eb; border-radius: 6px; margin: 0 12px 12px 0; }
  .progress { display: inline-block; width: 120px; height: 8px; background: #e5e7eb; border-radius: 4px; vertical-align: middle; overflow: hidden; } .progress span { display: block; height: 100%; background: #2563eb; }
  .wf-graph-box { overflow: auto; background: #fff; border: 1px solid #e5e7eb; border-radius: 6px; padding: 4px; margin-bottom: 12px; } svg.wf-graph { display: block; font-family: system-ui, -apple-system, "DejaVu Sans", sans-serif; }
  .st-pending { background: #f3f4f6; color: #374151; } .st-waiting { background: #fef3c7; color: #92400e; } .st-running { background: #dbeafe; color: #1e40af; } .st-completed { background: #dcfce7; color: #166534; } .st-failed { background: #fee2e2; color: #991b1b; } .st-cancelled { background: #e5e7eb; color: #4b5563; } .st-skipped { background: #fff; color: #6b7280; border: 1px dashed #9ca3af; }
  svg .axis { stroke: #9ca3af; } svg .tick, svg .chart-empty { fill: #6b7280; font-size: 10px; } svg .chart-title { font-size: 12px; font-weight: 600; } svg .legend { font-size: 11px; }
</style>
</head>
<body>
<header>
  <strong>drover</strong>
  @php($here = request()->route() ? request()->route()->getName() : '')
  <a href="{{ route('drover.overview') }}" class="{{ $here === 'drover.overview' ? 'on' : '' }}">Overview</a>
  <a href="{{ route('drover.jobs', 'pending') }}" class="{{ $here === 'drover.jobs' ? 'on' : '' }}">Jobs</a>
  <a href="{{ route('drover.completed') }}" class="{{ $here === 'drover.completed' ? 'on' : '' }}">Completed</a>
  <a href="{{ route('drover.failed') }}" class="{{ $here === 'drover.failed' ? 'on' : '' }}">Failed</a>
  <a href="{{ route('drover.batches') }}" class="{{ $here === 'drover.batches' ? 'on' : '' }}">Batches</a>
  <a href="{{ route('drover.workflows') }}" class="{{ str_starts_with((string) $here, 'drover.workflow') ? 'on' : '' }}">Workflows</a>
  <a href="{{ route('drover.groups') }}" class="{{ in_array($here, ['drover.groups', 'drover.group'], true) ? 'on' : '' }}">Groups</a>
  <a href="{{ route('drover.limits') }}" class="{{ $here === 'drover.limits' ? 'on' : '' }}">Limits</a>
  <a href="{{ route('drover.tags') }}" class="{{ $here === 'drover.tags' ? 'on' : '' }}">Tags</a>
  <a href="{{ route('drover.schedule') }}" class="{{ $here === 'drover.schedule' ? 'on' : '' }}">Schedule</a>
  <a href="{{ route('drover.search') }}" class="{{ in_array($here, ['drover.search', 'drover.actions.confirm'], true) ? 'on' : '' }}">Search</a>
  <a href="{{ route('drover.actions') }}" class="{{ in_array($here, ['drover.actions', 'drover.action'], true) ? 'on' : '' }}">Audit</a>
  @if (!($canOperate ?? false))<span class="badge" title="the operateDrover gate does not allow you to act">read-only</span>@endif
</header>
<main>
@if (session('drover.flash'))
  <div class="flash" id="flash">{{ session('drover.flash') }}</div>
@endif
@yield('content')
</main>
</body>
</html>
