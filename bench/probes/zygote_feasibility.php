<?php
// Zygote feasibility (issue 12, bench/notes.md): boot a Laravel app once, then fork N children,
// each doing what a worker would after the fork (forget inherited connections, reseed) and
// serializing a job; prints each child's fork-to-ready time. Measure PSS from /proc meanwhile.
//   php -d opcache.enable_cli=1 bench/probes/zygote_feasibility.php APP_DIR N [HOLD_SECONDS]
$base = $argv[1]; $n = (int) $argv[2]; $hold = (int) ($argv[3] ?? 20);
chdir($base);
require $base . '/vendor/autoload.php';
$app = require $base . '/bootstrap/app.php';
$app->make(Illuminate\Contracts\Console\Kernel::class)->bootstrap();
app('queue'); app('events'); app('db'); app('cache');
foreach (glob($base . '/app/Jobs/*.php') as $f) { class_exists('App\\Jobs\\' . basename($f, '.php')); }
fwrite(STDOUT, "zygote " . getmypid() . " booted\n");
for ($i = 0; $i < $n; $i++) {
    $t = hrtime(true);
    $pid = pcntl_fork();
    if ($pid === 0) {
        // What a worker would do after the fork: forget inherited connections, reseed.
        app('db')->purge();
        mt_srand();
        $ready = (hrtime(true) - $t) / 1e6;
        fwrite(STDOUT, sprintf("child %d ready in %.2f ms\n", getmypid(), $ready));
        // "Run a job": serialize/unserialize a payload and resolve a job class.
        $job = new App\Jobs\OkJob('x'); unserialize(serialize($job));
        sleep($hold);
        exit(0);
    }
}
sleep($hold + 1);
