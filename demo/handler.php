<?php
// The demo's job: busy-wait the payload's "ms" on a monotonic clock (like the seed benchmark's 10 ms
// job), then record the completion in demo_runs so the demo can count lost and duplicated jobs.
use Drover\Worker\Job;

$pdo = new PDO(getenv('DROVER_PDO_DSN'));
$pdo->setAttribute(PDO::ATTR_ERRMODE, PDO::ERRMODE_EXCEPTION);
$done = $pdo->prepare('INSERT INTO demo_runs (seq, job_id, attempt, pid) VALUES (?, ?, ?, ?)');

return static function (Job $job) use ($done): void {
    $spec = json_decode($job->payload, true, 512, JSON_THROW_ON_ERROR);
    $until = hrtime(true) + (int) $spec['ms'] * 1_000_000;
    while (hrtime(true) < $until) {
        // busy: the job uses its CPU time like real work would
    }
    $done->execute([$spec['seq'], $job->id, $job->attempts, getmypid()]);
};
