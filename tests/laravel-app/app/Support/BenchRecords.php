<?php

namespace App\Support;

/**
 * The benchmark's per-job records (bench/): one line a job, appended to `BENCH_RUNS_DIR/<pid>.runs`,
 * the file opened once per worker process. Written by App\Jobs\BenchJob and App\Jobs\WriteRowJob.
 */
final class BenchRecords
{
    /** @var resource|null this process's file */
    private static $file = null;

    public static function append(string $line): void
    {
        if (self::$file === null) {
            $dir = getenv('BENCH_RUNS_DIR');
            if ($dir === false || $dir === '') {
                throw new \RuntimeException('BENCH_RUNS_DIR is not set: the benchmark harness (bench/) sets it to the directory for the per-job records');
            }
            $path = $dir . '/' . getmypid() . '.runs';
            self::$file = fopen($path, 'ab') ?: throw new \RuntimeException("cannot open $path for appending");
        }
        if (fwrite(self::$file, $line) !== strlen($line)) {
            throw new \RuntimeException('cannot append the benchmark record');
        }
    }
}
