<?php

namespace Drover\Dashboard\Actions;

use Drover\Dashboard\DashboardDatabase;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;

/**
 * A bulk action confirmed in the dashboard, carried out in the background by drover's own workers
 * (docs/dashboard.md, "Acting on all that match"): on `dashboard.actions.connection` /
 * `dashboard.actions.queue` (default: the first drover connection, its default queue). A worker
 * killed half-way leaves the action's row where its last batch left it; the retry goes on from
 * there (Bulk), and never does a batch twice.
 */
class ApplyBulkAction implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable;

    /** A retry goes on from the last batch done. */
    public $tries = 5;

    /** 100,000 jobs take well under a minute; an hour is the ceiling, not the plan. */
    public $timeout = 3600;

    public function __construct(public int $action)
    {
    }

    public function handle(): void
    {
        (new Bulk(DashboardDatabase::connection()))->run($this->action);
    }

    public function failed(\Throwable $e): void
    {
        DashboardDatabase::connection()->update(
            "UPDATE drover.console_actions SET state = 'failed', finished_at = now(), outcome = ? WHERE id = ? AND state IN ('requested', 'running')",
            ['drover: the action stopped: ' . mb_substr($e->getMessage(), 0, 500) . ' (what it did before is counted; search again and act on what is left)', $this->action]
        );
    }

    /** Where the action is carried out: [connection, queue] (queue null: the connection's default). */
    public static function destination(): array
    {
        $connection = config('drover.dashboard.actions.connection');
        if (!is_string($connection) || $connection === '') {
            $connection = null;
            foreach ((array) config('queue.connections', []) as $name => $settings) {
                if (($settings['driver'] ?? null) === 'drover') {
                    $connection = (string) $name;
                    break;
                }
            }
        }
        $queue = config('drover.dashboard.actions.queue');
        return [$connection ?? (string) config('queue.default'), is_string($queue) && $queue !== '' ? $queue : null];
    }

    /** Dispatches action $id where destination() says. */
    public static function start(int $id): void
    {
        [$connection, $queue] = self::destination();
        $pending = self::dispatch($id)->onConnection($connection);
        if ($queue !== null) {
            $pending->onQueue($queue);
        }
    }
}
