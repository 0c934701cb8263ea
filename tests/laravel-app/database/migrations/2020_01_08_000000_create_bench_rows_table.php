<?php

use Illuminate\Database\Migrations\Migration;
use Illuminate\Database\Schema\Blueprint;
use Illuminate\Support\Facades\Schema;

// What App\Jobs\WriteRowJob and its variants write for bench/ (issue 59's bench,
// bench/src/exactly_once.rs): one row per job, on the application's default connection. A logged
// table, as an application's own rows are: each row's commit is a WAL flush.
return new class extends Migration
{
    public function up()
    {
        Schema::create('bench_rows', function (Blueprint $table) {
            $table->bigIncrements('id');
            $table->integer('seq');
            $table->integer('pid');
            $table->timestampTz('written_at', 6)->useCurrent();
        });
    }

    public function down()
    {
        Schema::dropIfExists('bench_rows');
    }
};
