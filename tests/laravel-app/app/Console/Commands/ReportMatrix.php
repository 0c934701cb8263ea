<?php

namespace App\Console\Commands;

use Illuminate\Console\Command;
use Illuminate\Support\Facades\DB;

/**
 * Prints the outcome of a matrix run as JSON: per label the events in order (event@attempt),
 * attempt by attempt, the failed_jobs rows (exception class), and each batch's counters, by name.
 */
class ReportMatrix extends Command
{
    protected $signature = 'matrix:report';

    protected $description = 'Report the outcome of the behaviour matrix as JSON';

    public function handle(): int
    {
        $events = [];
        foreach (DB::table('journal')->orderBy('id')->get() as $row) {
            $events[$row->label][] = "{$row->event}@{$row->attempt}";
        }
        foreach ($events as $label => &$list) {
            if (str_starts_with($label, 'multi_')) {
                sort($list);
            } else {
                // A job's attempts in turn, each attempt's events in the order recorded (the sort
                // is stable). A job released with no delay can start its next attempt on another
                // queue:work process before the first fires JobProcessed, so which of those two
                // records comes first is a race of the reference run, not a behaviour.
                usort($list, fn ($a, $b) => self::attempt($a) <=> self::attempt($b));
            }
        }
        unset($list);
        ksort($events);

        $failed = [];
        foreach (DB::table('failed_jobs')->orderBy('id')->get() as $row) {
            $payload = json_decode($row->payload, true);
            $class = strtok($row->exception, ':');
            $failed[$payload['label'] ?? '?'][] = $class;
        }
        ksort($failed);

        $batches = [];
        foreach (DB::table('job_batches')->orderBy('name')->get() as $batch) {
            $batches[$batch->name] = [
                'total' => $batch->total_jobs,
                'pending' => $batch->pending_jobs,
                'failed' => $batch->failed_jobs,
                'failed_job_ids' => count(json_decode($batch->failed_job_ids, true)),
                'cancelled' => $batch->cancelled_at !== null,
                'finished' => $batch->finished_at !== null,
            ];
        }
        $this->line(json_encode([
            'events' => $events,
            'failed' => $failed,
            'batch' => $batches,
        ], JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES));
        return 0;
    }

    /** The attempt of an "event@attempt" entry. */
    private static function attempt(string $entry): int
    {
        return (int) substr($entry, strrpos($entry, '@') + 1);
    }
}
