<?php

namespace Drover\Console;

use Drover\Dashboard\Actions\ActionLog;
use Drover\Dashboard\Actions\Actor;
use Drover\Dashboard\Actions\StopRequests;
use Drover\Dashboard\DashboardDatabase;
use Illuminate\Console\Command;

/**
 * `php artisan drover:stop-job ID`: stops a running job wherever it runs — the master holding it
 * kills exactly the worker running it — and settles it as asked: failed through the
 * application's own path (the default; `failed()` is called and Laravel's failer logs it), or
 * released to run again (`--release`); with `--kill`, no code of the job runs again (failed into
 * drover's own kept jobs, or put back on its queue). Waits until its attempt is over.
 *
 * `--attempt=N` (the attempt's number, as the dashboard shows it) or `--lease=T` (its lease
 * token) names the attempt to stop: when that one has ended the command refuses, naming the
 * attempt running now, rather than stop another. Without either it stops the attempt running
 * now, and says which.
 */
class StopJobCommand extends Command
{
    protected $signature = 'drover:stop-job
        {id : The job\'s id (drover.jobs, as the dashboard shows it)}
        {--release : Put the job back on its queue to run again instead of failing it}
        {--kill : Run no code of the job again: no failed(), no failer (it is kept in drover.failed_jobs)}
        {--attempt= : Stop only this attempt (its number, as the dashboard shows it); refused when another runs}
        {--lease= : Stop only the attempt holding this lease token (as the dashboard shows it); refused when another runs}
        {--wait=30 : Seconds to wait for its master to stop it}';

    protected $description = 'Stop a running drover job wherever it runs, and fail or release it';

    public function handle(): int
    {
        $id = $this->argument('id');
        if (!is_string($id) || !ctype_digit($id) || strlen($id) > 18) {
            $this->error('drover: the job id must be a whole number (drover.jobs.id, as the dashboard shows it), not ' . json_encode($id));
            return 1;
        }
        $wait = (float) $this->option('wait');
        if (!is_finite($wait) || $wait < 0) {
            $this->error("drover: --wait must be a number of seconds, 0 or more, got {$this->option('wait')}");
            return 1;
        }
        $named = [];
        foreach (['attempt' => 9, 'lease' => 18] as $option => $digits) {
            $value = $this->option($option);
            if ($value === null || $value === '') {
                $named[$option] = null;
                continue;
            }
            if (!is_string($value) || !ctype_digit($value) || strlen($value) > $digits) {
                $this->error("drover: --$option must be a whole number (as the dashboard's job page shows it), not " . json_encode($value));
                return 1;
            }
            $named[$option] = (int) $value;
        }
        $mode = $this->option('kill') ? 'kill' : 'graceful';
        $outcome = $this->option('release') ? 'release' : 'fail';
        $db = DashboardDatabase::connection();
        $actor = Actor::console();
        try {
            $stopped = (new StopRequests($db))->request((int) $id, $mode, $outcome, $actor->name, $named['lease'], $named['attempt']);
        } catch (\InvalidArgumentException $e) {
            $this->error('drover: ' . $e->getMessage());
            return 1;
        }
        $token = $stopped['token'];
        $log = new ActionLog($db);
        $log->done($actor, 'stop', ['job' => (int) $id], "stop of attempt {$stopped['attempt']} (lease $token) asked ($mode, then $outcome)");
        $this->line("drover: asked the master running job $id to stop attempt {$stopped['attempt']} (lease $token) — that attempt only ($mode, then $outcome)");
        $deadline = microtime(true) + $wait;
        $requests = new StopRequests($db);
        do {
            $progress = $requests->progress((int) $id, $token);
            if ($progress['state'] === 'ended') {
                $this->warn("drover: job $id's attempt ended by itself before any master stopped it (it completed, failed or was released as it would have)");
                return 0;
            }
            if ($progress['state'] === 'over') {
                $on = $progress['host'] === null ? '' : " on {$progress['host']}";
                $this->info("drover: job $id was stopped$on: " . match ([$mode, $outcome]) {
                    ['graceful', 'fail'] => 'it is failed through the application (failed() called, see queue:failed)',
                    ['graceful', 'release'] => 'it is released to run again',
                    ['kill', 'fail'] => 'it is failed into drover.failed_jobs; no code of it ran again',
                    default => 'it is back on its queue',
                });
                return 0;
            }
            usleep(100_000);
        } while (microtime(true) < $deadline);
        $this->error($progress['state'] === 'waiting'
            ? "drover: no master stopped job $id within {$wait} s: the master holding it does not answer the database, or runs a drover that cannot stop jobs (upgrade it); the request stays until its attempt ends"
            : "drover: job $id's worker was killed but the job was not settled within {$wait} s; it will be (see the master's log)");
        return 1;
    }
}
