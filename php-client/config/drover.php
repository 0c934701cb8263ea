<?php

// drover's configuration, in the spirit of Horizon's `supervisors`. `php artisan drover` reads it,
// checks it (unknown keys are refused by name) and hands it to the drover master as one versioned
// JSON contract; each `drover:work` worker reads its pool's options from it too.

return [

    // Path of the drover binary. Default: the DROVER_BINARY environment variable, else `drover`
    // found on PATH.
    'binary' => env('DROVER_BINARY'),

    // The Laravel database connection (config/database.php, driver pgsql) that holds drover's
    // schema. The master connects to the same database; the `drover` queue connection in
    // config/queue.php should name the same connection so enqueues share its transactions.
    // Default: the application's default connection.
    'database' => env('DROVER_DB_CONNECTION'),

    // The database connection the master itself connects with, when it should hold only a
    // master's rights (docs/postgres-roles.md): a connection to the same database as `database`
    // whose login role is granted drover_master. Default: `database`.
    'master_database' => env('DROVER_MASTER_DB_CONNECTION'),

    // Run a private PostgreSQL under state_dir instead (development): true, false, or 'auto' — the
    // embedded cluster when the connection drover would use is not PostgreSQL (a new Laravel 12 app
    // on SQLite), so `php artisan queue:listen` works with nothing set up. The application reaches
    // it through the `drover_embedded` connection, registered from state_dir/master.json while the
    // master runs (dispatches are then not part of the application's own transactions). Default
    // 'auto'.
    'embedded' => env('DROVER_EMBEDDED', 'auto'),

    // Where the master keeps its control socket, master.json, the exported config and, when
    // embedded, the cluster. Keep it short (socket paths are limited to 107 bytes). The drover
    // binary has the same default (storage/drover under the directory it runs in), so `drover
    // status` run in the application's directory finds the service. Default storage/drover.
    'state_dir' => env('DROVER_STATE_DIR', storage_path('drover')),

    // The application's path as the service names it: a deploy tool's `current` symlink, never the
    // release it points to. Workers start in it and a reload runs its artisan, so after
    // `ln -sfn releases/NEW current` a reload runs the new release (and a rollback the old one).
    // Default: the path artisan was started by (`php /var/www/app/current/artisan drover`), else
    // the shell's working directory when it is the application, else base_path().
    'app_path' => env('DROVER_APP_PATH'),

    // Apply drover's missing schema migrations when the master starts (under an advisory lock).
    // false: the master refuses a schema older than it needs and names the command that migrates
    // it (`php artisan migrate`, after `php artisan drover:install` published the migration).
    // A schema newer than the binary is always refused. Default true.
    'auto_migrate' => (bool) env('DROVER_AUTO_MIGRATE', true),

    // Seconds a leased job belongs to this master without renewal (renewed every third of it).
    // Each worker also stops itself if its lease is not renewed (docs/leases.md). At least 3.
    // Default 30.
    'lease' => 30,

    // Seconds SIGTERM / drover:terminate waits for running jobs before killing their workers.
    // Default 30.
    'shutdown_grace' => 30,

    // Seconds between fallback polls; NOTIFY wakes the master at once. Default 5.
    'poll_interval' => 5,

    // OS user of the embedded PostgreSQL when the master runs as root. Default postgres.
    'postgres_user' => 'postgres',

    // OS user the workers run as when the master is started as root (systemd), e.g. www-data.
    // Default null: the master's own user (a root master logs a warning).
    'user' => env('DROVER_USER'),

    // Restart circuit: after this many workers of a pool in a row die before they are healthy
    // (or never say hello in time), the pool starts none for restart_pause seconds, then tries one
    // probe; each failed probe doubles the pause (up to 10×). Defaults 5 and 30.
    'restart_failures' => 5,
    'restart_pause' => 30,

    // Days a failed job stays in drover.failed_jobs before the master deletes it (hourly, oldest
    // first). 0 keeps them forever. Laravel's own failed_jobs table is pruned by
    // `queue:prune-failed`, as always. Default 7.
    'failed_retention_days' => 7,

    // Ordered groups (docs/ordered-groups.md): jobs with a group (onGroup(), $messageGroup,
    // messageGroup()) run one at a time per group, in dispatch order. A job that fails for good
    // lets its group go on, unless the job says $holdGroupOnFailure = true or its queue is listed
    // here: the group then waits until the failed job is retried (queue:retry) or forgotten.
    'groups' => [
        'hold' => [],
    ],

    // Seconds a deduplication id (withDeduplicator(), deduplicationId()) drops later dispatches
    // with the same id on the same queue, counted from the first (as SQS FIFO). Default 300.
    'dedup_window' => 300,

    // The application's schedule (routes/console.php, bootstrap/app.php's withSchedule, or the
    // console kernel's schedule()), run by the master: no cron line and no schedule:work
    // (docs/schedule.md). On when the application defines a schedule; false turns it off on
    // this host (DROVER_SCHEDULE=false), for a fleet that runs it on some hosts only. Remove
    // the `* * * * * php artisan schedule:run` cron line where it is on: both would run each
    // task. `schedule_retention_days`: days of run history kept in drover.schedule_runs.
    'schedule' => env('DROVER_SCHEDULE', true),
    'schedule_retention_days' => 7,
    // A task that needs attention raises an alert like the long-wait alert (the same mail and
    // Slack routes; the event Drover\Events\ScheduledTaskAlert), once per long_wait_cooldown
    // across the fleet: failing once `schedule_alert_failures` runs failed since its last
    // success, overdue once `schedule_alert_overdue` of its due times passed without one. 0
    // turns either off.
    'schedule_alert_failures' => env('DROVER_SCHEDULE_ALERT_FAILURES', 3),
    'schedule_alert_overdue' => env('DROVER_SCHEDULE_ALERT_OVERDUE', 3),

    // Long-wait alerts, as Horizon's: when the oldest available job of a queue
    // (`connection:queue`) has waited longer than this many seconds, the master runs
    // `php artisan drover:long-wait`, which fires Drover\Events\LongWaitDetected and sends it
    // to Drover::routeMailNotificationsTo() / Drover::routeSlackNotificationsTo() (set them in
    // a service provider). Once per queue per long_wait_cooldown seconds, across every master.
    // 0 turns a queue's alert off.
    'waits' => [
        'drover:default' => 60,
    ],
    'long_wait_cooldown' => 300,

    // Seconds a snapshot may hold the database's vacuum horizon back — a report left open in
    // REPEATABLE READ, a request idle in its transaction, a pg_dump, a standby's
    // hot_standby_feedback, a forgotten replication slot — before the master logs a warning
    // naming it and how to end it. While one is held, the rows of settled jobs cannot be
    // vacuumed and claims slow (docs/operations.md, "A held snapshot"). 0: no warning.
    'snapshot_alert' => 60,

    // Fleet-wide budgets (docs/budgets.md): at most this many jobs of a queue (`connection:queue`)
    // running — or handed to a worker to run next — at once across every master of the
    // database, e.g. for a third-party API that allows ten connections. A job over the budget
    // waits unclaimed (no attempt used, no release) and is handed out the moment a job of the
    // queue ends on any host. Every host must name the same budgets. Default: none.
    'budgets' => [
        // 'drover:api' => 10,
    ],

    // Fair queues (docs/limits.md, "Fair share"): the workers take the jobs of a fair queue's keys
    // (tenants) in turn, so a tenant with 100,000 jobs waiting does not delay one with 10. A job
    // names its key with a `$fairKey` property or `fairKey()` method (and may weigh it with
    // `fairWeight()`); a job without one shares the key ''. Default: none (every queue in order).
    'fair' => [
        // 'drover:tenants',
    ],

    // The dashboard (docs/dashboard.md): at /drover on the application's own routes, for those the
    // `viewDrover` gate allows (anyone in the local environment), as Horizon's. Server-rendered,
    // no assets to publish.
    'dashboard' => [
        'enabled' => true,
        'path' => env('DROVER_PATH', 'drover'),
        'domain' => env('DROVER_DOMAIN'),
        'middleware' => ['web'],
        // The database connection the dashboard, `drover:status --fleet` and `drover:restart
        // --fleet` read drover's tables with (and act with): a login role granted drover_reader
        // for a dashboard that only looks, drover_operator for one that acts
        // (docs/postgres-roles.md). Default: `database`.
        'database' => env('DROVER_DASHBOARD_DB_CONNECTION'),
        // Seconds between reloads of the overview and job lists (0: none). Each overview load
        // counts every queue through the claim's index (up to 100,000 jobs each).
        'refresh' => 5,
        // Days the audit trail (every action taken from the dashboard: who, what, on which jobs,
        // when, how it ended) is kept; 0: forever.
        'audit_days' => 90,
        // Where the dashboard's bulk actions (retry, delete, forget, move, release all that a
        // search matches) are carried out in the background: a queue a drover pool serves. Null:
        // the first connection whose driver is drover, and its default queue.
        'actions' => [
            'connection' => env('DROVER_ACTIONS_CONNECTION'),
            'queue' => env('DROVER_ACTIONS_QUEUE'),
        ],
        // Names whose values are shown as "[redacted]" on every page, in search results and in
        // the audit trail (docs/dashboard.md, "Redaction"): keys of a payload's JSON, properties
        // of a job's serialized command (and of the serialized values nested in it), named values
        // in exceptions and outputs. Added to the defaults, which always apply: `*token*`,
        // `*secret*`, `*password*`, `*_key`, authorization, cookie, card_number, cvv. A rule with
        // `*` is a pattern; one without is a name, matched exactly. Case-insensitive, `-` as `_`,
        // camelCase as snake_case. A ShouldBeEncrypted job's command is never decrypted.
        'redact' => ['password', 'password_confirmation', 'secret', 'token', 'api_key', 'authorization', 'card_number', 'cvv'],
    ],

    // Metrics (docs/metrics.md). record: per-minute rows per queue and job class in
    // drover.metrics (counts, run time, wait, per-job CPU and peak memory), for the dashboard;
    // trim: minutes they are kept (0: forever); history: minutes each completed job (payload,
    // timings, worker, CPU, memory) is kept in drover.recent_jobs (0: none; its cost is in
    // bench/RESULTS.md); listen: where the master serves Prometheus's GET /metrics and
    // GET /healthz, e.g. '127.0.0.1:9187' or a port alone, 9187, on 127.0.0.1 (null: nowhere);
    // token: the bearer token GET /metrics then asks for (Prometheus's `authorization:
    // credentials`), which also shows /healthz's problems; at least 16 visible characters, e.g.
    // `openssl rand -hex 32` (null: none; a listener off loopback should have one).
    'metrics' => [
        'record' => true,
        'trim' => 1440,
        'history' => 0,
        'listen' => env('DROVER_METRICS_LISTEN'),
        'token' => env('DROVER_METRICS_TOKEN'),
    ],

    // Traces (OpenTelemetry, by the messaging conventions): the master exports a `send`,
    // a `process` (per attempt) and a `settle` span of each job to an OTLP/HTTP collector.
    // endpoint: the collector's base URL, http://HOST:PORT (spans go to /v1/traces); null: no
    // traces and no cost. Default null. service_name: the spans' service.name. Default drover.
    // A job dispatched on a drover connection inside a traced request carries the request's
    // W3C trace context in its payload (`traceparent`, `tracestate`, and `drover_sent_at`, the
    // moment of dispatch), so that its spans have the dispatching span as their parent. The
    // context is the OpenTelemetry API's current span when the application has
    // open-telemetry/api, else a `traceparent` (and `tracestate`) it keeps in Laravel's Context
    // (Laravel 11+, hidden or not); PHP starts no trace of its own. propagate: false leaves
    // every payload without them. Default true.
    'traces' => [
        'endpoint' => env('DROVER_TRACES_ENDPOINT'),
        'service_name' => env('DROVER_TRACES_SERVICE', 'drover'),
        'propagate' => env('DROVER_TRACES_PROPAGATE', true),
    ],

    // The pools, by name. Every key is optional; the defaults are shown.
    'defaults' => [
        'default' => [
            // The queue connection (config/queue.php) whose jobs this pool runs; failed_jobs rows
            // carry its name. Default drover.
            'connection' => 'drover',
            // Queues served, highest priority first. Default ['default'].
            'queue' => ['default'],
            // Worker processes. Default 1.
            'processes' => 1,
            // Attempts for jobs that do not set $tries (0 = unlimited), as queue:work --tries.
            // Default 1.
            'tries' => 1,
            // Seconds a job may run (unless it sets $timeout); past it the master kills the worker
            // and settles the job at once by Laravel's rules. 0 = no limit. Default 60.
            'timeout' => 60,
            // Seconds a running job may go on past the end of a lease its master cannot renew
            // because the database is unreachable (a managed failover takes 30-120 s), instead
            // of its worker being stopped before the lease ends. No other master takes the job
            // back meanwhile, so it never runs twice at once; the cost is that a host lost with
            // its jobs gives them back this much later (docs/leases.md, "Outage grace").
            // Default 0.
            'outage_grace' => 0,
            // Megabytes of memory after which a worker finishes its job and is replaced: checked by
            // Laravel after each job (memory_get_usage) and by the master every 5 s as the
            // process's PSS from /proc, which also sees memory outside PHP's allocator. Default 128.
            'memory' => 128,
            // Seconds before retrying a job that threw, unless it sets $backoff: an int or a list
            // (one per attempt, the last repeating). Default 0.
            'backoff' => 0,
            // Jobs after which a worker is replaced (0 = never). Default 0.
            'max_jobs' => 0,
            // Seconds after which a worker is replaced (0 = never). Default 0.
            'max_time' => 0,
            // Jobs the master may push to a worker ahead of time. Default 1. More keeps a worker of
            // short jobs busy (bench/: 8 for no-op jobs); a prefetched job waits behind the running
            // one, so keep it at 1 for long jobs.
            'prefetch' => 1,
            // How the workers are spread over the queues (Horizon's balance):
            //   'off'    one set of workers serves the queues in priority order (default);
            //   'simple' processes split evenly, each queue its own workers;
            //   'auto'   each queue its own workers, as many as its backlog calls for: at least
            //            min_processes per queue, at most max_processes (default: processes) in all,
            //            up to balance_max_shift more or fewer per queue every balance_cooldown
            //            seconds; a queue gives a worker up only after wanting fewer for
            //            scale_down_delay seconds. autoscaling_strategy 'time' weighs each backlog
            //            by its jobs' average run time, 'size' counts jobs only.
            'balance' => 'off',
            'min_processes' => 1,
            'max_processes' => null,
            'balance_max_shift' => 1,
            'balance_cooldown' => 3,
            'autoscaling_strategy' => 'time',
            'scale_down_delay' => 10,
            // The workers' nice value (-20 to 19; below 0 needs root). Default 0.
            'nice' => 0,
            // Seconds a new worker has to boot and say hello; past it, it is killed and counted as
            // a failed start. Default 60.
            'boot_timeout' => 60,
            // How workers are started. 'fork' (default): one zygote per pool boots the application
            // once, with OPcache, and the workers are forked from it in milliseconds, sharing its
            // memory; a zygote that cannot boot makes the pool start its workers by 'exec' instead,
            // with a warning naming the cause. 'exec': each worker is a fresh process that boots
            // the application itself — for an application whose boot is not fork-safe (it keeps
            // a connection or socket open that the framework does not know of).
            'spawn' => 'fork',
            // Seconds a worker sleeps while paused by maintenance mode. Workers never poll: the
            // master pushes jobs the moment they are available. Default 3.
            'sleep' => 3,
            // Run even in maintenance mode. Default false.
            'force' => false,
            // Seconds to rest after each job. Default 0.
            'rest' => 0,
        ],
    ],

    // Which pools run in which environment (APP_ENV), by Laravel Horizon's rules:
    //   - a key is an environment name or a pattern where `*` stands for any characters
    //     ('production*', '*'), matched as Horizon matches them (Str::is, case-sensitive);
    //   - the first entry whose key matches, in the order written, is used: put specific keys
    //     before patterns (a '*' written first matches every environment);
    //   - that entry runs every pool of `defaults` with the entry's options for it on top, plus
    //     the pools only the entry names (they start from the documented defaults); an option
    //     replaces the default whole, a list included; [] runs the defaults as they are;
    //   - an environment that no entry matches runs NO workers (add '*' => [] to run the
    //     defaults everywhere).
    // E.g. 'production' => ['default' => ['processes' => 8], 'mail' => ['queue' => ['mail']]].
    'environments' => [
        'production' => [],
        'local' => [],
    ],
];
