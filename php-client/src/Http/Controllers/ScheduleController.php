<?php

namespace Drover\Http\Controllers;

use Drover\Dashboard\Repositories\ScheduleRepository;
use Drover\Schedule\Tasks;
use Illuminate\Console\Scheduling\Schedule;
use Illuminate\Contracts\Console\Kernel as ConsoleKernel;
use Illuminate\Http\Request;
use Illuminate\Routing\Controller;

/**
 * The schedule (docs/schedule.md): each task of the application's schedule with its next due
 * time, its latest run and whether it is paused; the recent runs with their output; and two
 * actions, gated like the rest of the dashboard — pause / resume a task, and run it now.
 */
class ScheduleController extends Controller
{
    private function runs(): ScheduleRepository
    {
        return new ScheduleRepository(\Drover\Dashboard\DashboardDatabase::connection());
    }

    /**
     * The application's schedule. It is defined when the console starts (the console kernel's
     * schedule(), `withSchedule`, routes/console.php), which a web request does not do: the
     * console kernel is bootstrapped here, as `schedule:list` would be.
     *
     * @return array<int, array{key: string, event: \Illuminate\Console\Scheduling\Event}>
     */
    private function tasks(): array
    {
        app(ConsoleKernel::class)->all();
        return Tasks::keyed(app(Schedule::class));
    }

    public function index()
    {
        $tasks = $this->tasks();
        $state = $this->runs()->state(array_column($tasks, 'key'));
        $rows = [];
        foreach ($tasks as $keyed) {
            $event = $keyed['event'];
            $next = null;
            try {
                $next = $event->nextRunDate()->utc()->format('Y-m-d H:i:s') . ' UTC';
            } catch (\Throwable) {
                // An expression the cron library cannot read: the master names it in its log.
            }
            $rows[] = (object) [
                'key' => $keyed['key'],
                // A command line may carry a credential (--password=...): as a page may show it.
                'summary' => \Drover\Dashboard\Redaction::fromConfig()->text(Tasks::summary($event)),
                'expression' => (string) $event->expression,
                'repeat' => property_exists($event, 'repeatSeconds') ? $event->repeatSeconds : null,
                'timezone' => Tasks::timezone($event),
                'one_server' => (bool) $event->onOneServer,
                'next' => $next,
                'latest' => $state[$keyed['key']]->latest,
                'paused' => $state[$keyed['key']]->paused,
            ];
        }
        return view('drover::schedule', ['tasks' => $rows, 'recent' => $this->runs()->recent()]);
    }

    public function pause(Request $request)
    {
        [$key, $summary] = $this->task($request);
        $this->runs()->pause($key, $summary, $this->who($request));
        $this->audit($request, 'schedule-pause', $key, "“{$summary}” paused");
        return redirect()->route('drover.schedule')->with('drover.flash', "“{$summary}” is paused: its due times are skipped until it is resumed.");
    }

    public function resume(Request $request)
    {
        [$key, $summary] = $this->task($request);
        $resumed = $this->runs()->resume($key);
        $this->audit($request, 'schedule-resume', $key, $resumed ? "“{$summary}” resumed" : "“{$summary}” was not paused");
        return redirect()->route('drover.schedule')->with('drover.flash', $resumed ? "“{$summary}” is resumed." : "“{$summary}” was not paused.");
    }

    public function runNow(Request $request)
    {
        [$key, $summary] = $this->task($request);
        $this->runs()->runNow($key, $summary, $this->who($request));
        $this->audit($request, 'schedule-run-now', $key, "“{$summary}” asked to run now");
        return redirect()->route('drover.schedule')->with('drover.flash', "“{$summary}” was asked to run now: a master that runs the schedule starts it within a few seconds.");
    }

    /** @return array{0: string, 1: string} the key and summary of the task the form names */
    private function task(Request $request): array
    {
        $key = $request->input('task');
        abort_unless(is_string($key) && $key !== '', 404, 'drover: name a task of the schedule');
        foreach ($this->tasks() as $keyed) {
            if ($keyed['key'] === $key) {
                return [$key, Tasks::summary($keyed['event'])];
            }
        }
        abort(404, "drover: $key is not a task of the application's schedule");
    }

    /** The action in the console's audit trail. */
    private function audit(Request $request, string $verb, string $key, string $outcome): void
    {
        (new \Drover\Dashboard\Actions\ActionLog(\Drover\Dashboard\DashboardDatabase::connection()))
            ->done(\Drover\Dashboard\Actions\Actor::of($request), $verb, ['task' => $key], $outcome);
    }

    /** Who acted, for the history: the user's name or e-mail, else the client's address. */
    private function who(Request $request): string
    {
        $user = $request->user();
        $name = $user === null ? null : ($user->email ?? $user->name ?? null);
        return is_string($name) && $name !== '' ? $name : 'the dashboard (' . $request->ip() . ')';
    }
}
