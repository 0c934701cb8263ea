<?php

namespace App\Support;

use Illuminate\Support\Facades\DB;

final class Journal
{
    public static function record(string $label, string $event, int $attempt, ?string $connection = null): void
    {
        DB::connection(config('database.fixture_journal'))->table('journal')->insert([
            'label' => $label,
            'event' => $event,
            'attempt' => $attempt,
            'connection' => $connection,
            'pid' => getmypid(),
        ]);
    }
}
