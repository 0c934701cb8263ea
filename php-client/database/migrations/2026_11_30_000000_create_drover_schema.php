<?php

use Drover\Schema\SchemaMigrator;
use Illuminate\Database\Migrations\Migration;
use Illuminate\Support\Facades\DB;

// drover's schema (schema `drover`: jobs, failed jobs, nodes), published by
// `php artisan drover:install`. It applies drover/laravel's schema migrations — the same files the
// drover binary applies — so the schema is at the version the binary of that release expects,
// whichever of `php artisan migrate`, `drover migrate` or a starting master gets there first.
return new class extends Migration
{
    /** drover's database connection (drover.database in config/drover.php). */
    public function getConnection()
    {
        return config('drover.database') ?: config('database.default');
    }

    public function up(): void
    {
        if (\Drover\Config\Embedded::wanted(app(), config('drover.database') ?: null)) {
            // The embedded cluster is the master's: it applies the schema itself at every start.
            return;
        }
        (new SchemaMigrator(DB::connection($this->getConnection())))->migrate();
    }

    /** Refuses while drover.jobs holds jobs. */
    public function down(): void
    {
        if (\Drover\Config\Embedded::wanted(app(), config('drover.database') ?: null)) {
            return;
        }
        (new SchemaMigrator(DB::connection($this->getConnection())))->drop();
    }
};
