<?php

use Illuminate\Database\Migrations\Migration;
use Illuminate\Database\Schema\Blueprint;
use Illuminate\Support\Facades\Schema;

// What App\Jobs\ForkProbe and TransactionProbe record of the worker that ran them.
return new class extends Migration
{
    public function up()
    {
        Schema::create('fork_probes', function (Blueprint $table) {
            $table->bigIncrements('id');
            $table->integer('seq');
            $table->integer('pid');
            $table->integer('ppid');
            $table->integer('backend');
            $table->bigInteger('mt_rand')->nullable();
            $table->bigInteger('random_int')->nullable();
            $table->text('lcg')->nullable();
            $table->text('uniqid')->nullable();
            $table->text('str_random')->nullable();
            $table->integer('seen')->nullable();
            $table->bigInteger('redis_client')->nullable();
        });
    }

    public function down()
    {
        Schema::dropIfExists('fork_probes');
    }
};
