<?php

use Illuminate\Database\Migrations\Migration;
use Illuminate\Database\Schema\Blueprint;
use Illuminate\Support\Facades\Schema;

// What App\Jobs\ForkProbe and TransactionProbe record of the worker that ran them, and the
// cache table the fork tests' database cache store uses.
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
            // FIXTURE_BOOT_CACHE: the backend of the database cache store's connection, and the
            // job's own backend again after it used the store.
            $table->integer('cache_backend')->nullable();
            $table->integer('backend_after')->nullable();
        });
        // Laravel's database cache store's table (the `database` store of config/cache.php).
        Schema::create('cache', function (Blueprint $table) {
            $table->string('key')->primary();
            $table->mediumText('value');
            $table->integer('expiration');
        });
    }

    public function down()
    {
        Schema::dropIfExists('cache');
        Schema::dropIfExists('fork_probes');
    }
};
