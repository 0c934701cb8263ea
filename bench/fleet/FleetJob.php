<?php

namespace Bench;

use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;

/**
 * Shape 8's job (bench/src/fleet.rs): sleeps $ms (an "API call", not CPU) and appends what it
 * did to a file of its worker process in $BENCH_FLEET_DIR, one write(2) per line:
 * "S|H|E seq attempt pid host time" for its start, a heartbeat every second of a job of 1 s or
 * more, and its end. A run killed mid-job leaves an S (and heartbeats) without an E, so the
 * harness sees every execution, when it began and about when it stopped. $host is the
 * BENCH_HOST of the master that ran it. Three tries: a run killed in an outage is run again.
 * No database round trip: the records must be written while the database is away.
 *
 * Loaded by the bench app's bootstrap/providers.php (bench/horizon/providers.php), copied beside
 * it by the harness: the fixture's app/ is the tests', not the bench's.
 */
class FleetJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable;

    public $tries = 3;

    /** @var resource|null */
    private static $out = null;

    public function __construct(public int $seq, public int $ms = 50)
    {
    }

    public function handle(): void
    {
        $attempt = $this->attempts();
        $this->line('S', $attempt);
        $until = microtime(true) + $this->ms / 1000;
        $beat = microtime(true) + 1.0;
        while (($left = $until - microtime(true)) > 0) {
            $wake = $this->ms >= 1000 ? min($until, $beat) : $until;
            usleep(max(1, (int) (($wake - microtime(true)) * 1e6)));
            if ($this->ms >= 1000 && microtime(true) >= $beat) {
                $this->line('H', $attempt);
                $beat += 1.0;
            }
        }
        $this->line('E', $attempt);
    }

    private function line(string $event, int $attempt): void
    {
        if (self::$out === null) {
            $dir = getenv('BENCH_FLEET_DIR');
            if ($dir === false || $dir === '') {
                throw new \RuntimeException('BENCH_FLEET_DIR is not set: drover-bench sets it for shape 8');
            }
            $file = $dir . '/' . getmypid() . '.fleet';
            self::$out = fopen($file, 'ab') ?: throw new \RuntimeException("cannot open $file for appending");
        }
        $host = getenv('BENCH_HOST') ?: '-';
        $text = sprintf("%s %d %d %d %s %.6f\n", $event, $this->seq, $attempt, getmypid(), $host, microtime(true));
        if (fwrite(self::$out, $text) !== strlen($text)) {
            throw new \RuntimeException('cannot append the fleet record');
        }
    }
}
