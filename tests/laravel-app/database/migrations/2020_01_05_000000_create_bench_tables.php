<?php

use Illuminate\Database\Migrations\Migration;
use Illuminate\Support\Facades\DB;

// Per-job timestamps for bench/: when each dispatch committed and when each run started and ended
// (Unix seconds with microseconds). Unlogged: measurement scratch, not data to keep.
return new class extends Migration
{
    public function up()
    {
        DB::statement('CREATE UNLOGGED TABLE bench_runs (seq int NOT NULL, attempt int NOT NULL, pid int NOT NULL, started_at double precision NOT NULL, finished_at double precision NOT NULL)');
        DB::statement('CREATE UNLOGGED TABLE bench_dispatch (seq int NOT NULL, committed_at double precision NOT NULL)');
    }

    public function down()
    {
        DB::statement('DROP TABLE IF EXISTS bench_runs, bench_dispatch');
    }
};
