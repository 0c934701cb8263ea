<?php

use Illuminate\Database\Migrations\Migration;
use Illuminate\Support\Facades\DB;

// For bench/: when each dispatch committed (Unix seconds with microseconds), written by the producer
// after its last dispatch. When each job started and ended goes to files (App\Jobs\BenchJob).
// Unlogged: measurement scratch, not data to keep.
return new class extends Migration
{
    public function up()
    {
        if (DB::getDriverName() !== 'pgsql') {
            return; // the benchmark runs on PostgreSQL only (the dev-loop test runs on SQLite)
        }
        DB::statement('CREATE UNLOGGED TABLE bench_dispatch (seq int NOT NULL, committed_at double precision NOT NULL, took double precision)');
    }

    public function down()
    {
        DB::statement('DROP TABLE IF EXISTS bench_dispatch');
    }
};
