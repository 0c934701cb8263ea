<?php

use Illuminate\Database\Migrations\Migration;
use Illuminate\Database\Schema\Blueprint;
use Illuminate\Support\Facades\DB;
use Illuminate\Support\Facades\Schema;

// The fixture's own tables: the event journal and a model for deleteWhenMissingModels.
return new class extends Migration
{
    public function up()
    {
        Schema::create('journal', function (Blueprint $table) {
            $table->bigIncrements('id');
            $table->text('label');
            $table->text('event');
            $table->integer('attempt');
            $table->text('connection')->nullable();
            $table->integer('pid');
            // The statement's time on PostgreSQL (several events share a transaction).
            // Microseconds: scenarios compare starts with when a pause returned.
            $table->timestampTz('at', 6)->default(DB::raw(DB::getDriverName() === 'pgsql' ? 'clock_timestamp()' : 'CURRENT_TIMESTAMP'));
        });
        Schema::create('widgets', function (Blueprint $table) {
            $table->id();
            $table->text('name');
            $table->timestamps();
        });
    }

    public function down()
    {
        Schema::dropIfExists('journal');
        Schema::dropIfExists('widgets');
    }
};
