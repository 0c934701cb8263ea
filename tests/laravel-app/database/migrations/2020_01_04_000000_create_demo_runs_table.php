<?php

use Illuminate\Database\Migrations\Migration;
use Illuminate\Database\Schema\Blueprint;
use Illuminate\Support\Facades\DB;
use Illuminate\Support\Facades\Schema;

// Where the demo's DemoJob records each completion, so lost and duplicated jobs can be counted.
return new class extends Migration
{
    public function up()
    {
        Schema::create('demo_runs', function (Blueprint $table) {
            $table->integer('seq');
            $table->integer('attempt');
            $table->integer('pid');
            $table->timestampTz('finished_at')->default(DB::raw(DB::getDriverName() === 'pgsql' ? 'clock_timestamp()' : 'CURRENT_TIMESTAMP'));
        });
    }

    public function down()
    {
        Schema::dropIfExists('demo_runs');
    }
};
