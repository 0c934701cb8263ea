<?php

namespace Drover\Dashboard\Actions;

use Drover\Dashboard\DashboardDatabase;
use Drover\Dashboard\Repositories\BulkActionRepository;
use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldBeEncrypted;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;

/**
 * A bulk action confirmed in the dashboard, carried out in the background by drover's own workers
 * (docs/dashboard.md, "Acting on all that match"): on `dashboard.actions.connection` /
 * `dashboard.actions.queue` (default: the first drover connection, its default queue). A worker
 * killed half-way leaves the action's row where its last batch left it; the retry goes on from
 * there (Bulk), and never does a batch twice.
 *
 * It carries the search's free-text filters (`text`, `exception`), which the action's row in
 * the audit trail — read by every viewer — keeps only as "[withheld]": encrypted with the
 * application's key in its own payload (ShouldBeEncrypted; the console never decrypts a
 * command), and gone with the job — drover deletes its row when it completes.
 */
class ApplyBulkAction implements ShouldQueue, ShouldBeEncrypted
{
    use Dispatchable, InteractsWithQueue, Queueable;

    /** A retry goes on from the last batch done. */
    public $tries = 5;

    /** 100,000 jobs take well under a minute; an hour is the ceiling, not the plan. */
    public $timeout = 3600;

    /**
     * @param array<string, string> $withheld the search's free-text filters, by name
     */
    public function __construct(public int $action, public array $withheld = [])
    {
    }

    /**
     * Runs the action. A failure is rethrown as one naming the action, with neither the SQL nor
     * the frames that held the withheld filters (a query's message carries its bindings; a
     * trace, its arguments): what the job's note, the failer and the audit trail keep of it is
     * read by every viewer.
     */
    public function handle(): void
    {
        try {
            (new Bulk(DashboardDatabase::connection()))->run($this->action, INF, $this->withheld);
        } catch (\Throwable $e) {
            throw new \RuntimeException("drover: bulk action {$this->action} stopped: " . $this->told($e));
        }
    }

    public function failed(\Throwable $e): void
    {
        (new BulkActionRepository(DashboardDatabase::connection()))->failUnlessOver(
            $this->action,
            'drover: the action stopped: ' . $this->told($e) . ' (what it did before is counted; search again and act on what is left)',
        );
    }

    /** What may be said of a failure: a query's error without its SQL, no withheld value, redacted. */
    private function told(\Throwable $e): string
    {
        $message = $e instanceof \Illuminate\Database\QueryException
            ? 'a query failed: ' . ($e->getPrevious()?->getMessage() ?? 'no message')
            : $e->getMessage();
        foreach ($this->withheld as $value) {
            if (is_string($value) && $value !== '') {
                $message = str_replace([$value, trim((string) json_encode($value), '"')], \Drover\Dashboard\Redaction::WITHHELD, $message);
            }
        }
        return \Drover\Dashboard\Redaction::fromConfig()->text(mb_substr($message, 0, 500));
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

    /**
     * Dispatches action $id where destination() says, with the search's withheld filters.
     *
     * @param array<string, string> $withheld
     */
    public static function start(int $id, array $withheld = []): void
    {
        [$connection, $queue] = self::destination();
        $pending = self::dispatch($id, $withheld)->onConnection($connection);
        if ($queue !== null) {
            $pending->onQueue($queue);
        }
    }
}
