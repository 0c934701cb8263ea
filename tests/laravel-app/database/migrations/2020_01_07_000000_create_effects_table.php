<?php

use Illuminate\Database\Migrations\Migration;
use Illuminate\Database\Schema\Blueprint;
use Illuminate\Support\Facades\DB;
use Illuminate\Support\Facades\Schema;

// What App\Jobs\EffectJob and ExactlyOnceEffectJob write: one row per run of the job's effect,
// on the application's connection (tests/exactly_once.rs counts them per job).
return new class extends Migration
{
    public function up()
    {
        Schema::create('effects', function (Blueprint $table) {
            $table->bigIncrements('id');
            $table->text('label');
            $table->integer('attempt');
            $table->integer('pid');
            $table->timestampTz('at', 6)->default(DB::raw(DB::getDriverName() === 'pgsql' ? 'clock_timestamp()' : 'CURRENT_TIMESTAMP'));
        });
    }

    public function down()
    {
        Schema::dropIfExists('effects');
    }
};
