<?php

namespace App\Jobs;

use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Support\Facades\DB;

/**
 * Two jobs meant to run at once on two workers: the `holder` inserts a widget in a transaction it
 * keeps open, the `checker` counts that widget from its own worker while the transaction is open,
 * then the holder rolls back. Two workers sharing one database session would see each other's
 * uncommitted row (or garble the protocol); two sessions never do. Coordinated through files in
 * storage; the checker's count goes to fork_probes.seen.
 */
class TransactionProbe implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable;

    public function __construct(public string $role)
    {
    }

    public function handle(): void
    {
        $held = storage_path('tx-held');
        $checked = storage_path('tx-checked');
        if ($this->role === 'holder') {
            DB::beginTransaction();
            DB::insert("INSERT INTO widgets (name) VALUES ('uncommitted')");
            touch($held);
            self::waitFor($checked);
            DB::rollBack();
            DB::insert('INSERT INTO fork_probes (seq, pid, ppid, backend) VALUES (?, ?, ?, ?)', [-1, getmypid(), posix_getppid(), DB::selectOne('SELECT pg_backend_pid() AS pid')->pid]);
            return;
        }
        self::waitFor($held);
        $seen = DB::selectOne("SELECT count(*) AS n FROM widgets WHERE name = 'uncommitted'")->n;
        DB::insert('INSERT INTO fork_probes (seq, pid, ppid, backend, seen) VALUES (?, ?, ?, ?, ?)', [-2, getmypid(), posix_getppid(), DB::selectOne('SELECT pg_backend_pid() AS pid')->pid, $seen]);
        touch($checked);
    }

    private static function waitFor(string $file): void
    {
        $deadline = microtime(true) + 20;
        while (!file_exists($file)) {
            if (microtime(true) > $deadline) {
                throw new \RuntimeException("$file never appeared: the other probe did not run alongside");
            }
            usleep(10000);
        }
    }
}
