//! Every check of the run configuration, collected so all problems are reported at once, and
//! what a reload cannot take over.

use super::pool_limits::{coverage_problem, problem, Limit, MAX_SECONDS, POOL_LIMITS};
use super::{PoolSpec, RunConfig, SpawnMode};

/// The longest frame a worker may be allowed to send (64 MiB).
pub const MAX_FRAME_BYTES: usize = 64 << 20;
/// The shortest lease, seconds. A worker's deadline lies lease/10 before its lease ends and
/// moves when a renewal (every lease/3) succeeds, so between renewals a healthy worker's nearest
/// deadline is 17/30 of the lease away: at 3 s, 1.7 s, which leaves a renewal its full client
/// deadline (lease/3) and a prefetched job the 1 s the worker wants before starting it
/// (docs/leases.md, "Margins"). Shorter leases stop healthy workers.
pub const MIN_LEASE_SECS: f64 = 3.0;

/// The largest fleet-wide budget of a queue, in jobs leased at once.
pub const MAX_BUDGET: i64 = 1_000_000;

/// The longest failed-job retention, days (ten years).
pub const MAX_RETENTION_DAYS: u64 = 3650;

/// A duration setting: finite, positive (or 0 where `zero_ok`), at most [`MAX_SECONDS`], by the
/// rule pools' durations follow (`pool_limits`).
fn check_seconds(problems: &mut Vec<String>, name: &str, secs: f64, zero_ok: bool) {
    if let Some(problem) = problem(name, Limit::Seconds { zero_ok }, &serde_json::json!(secs)) {
        problems.push(problem);
    }
}

impl RunConfig {
    /// Every problem of the configuration at once, in a fixed order: each check below in turn.
    pub fn validate(&self) -> Result<(), Vec<String>> {
        let mut problems = Vec::new();
        self.check_ranges(&mut problems);
        self.check_long_waits(&mut problems);
        self.check_budgets(&mut problems);
        self.check_history_and_listener(&mut problems);
        self.check_lease_restarts_and_user(&mut problems);
        self.check_pools(&mut problems);
        self.check_schedule(&mut problems);
        if let Some(Err(problem)) = self.traces.as_ref().map(|t| t.endpoint()) {
            problems.push(problem);
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    /// The schedule's commands.
    fn check_schedule(&self, problems: &mut Vec<String>) {
        let Some(schedule) = &self.schedule else {
            return;
        };
        for (name, command) in [
            ("schedule.export_command", &schedule.export_command),
            ("schedule.run_command", &schedule.run_command),
        ] {
            if command.is_empty() || command[0].is_empty() {
                problems.push(format!(
                    "{name} must name a program, e.g. [\"php\", \"artisan\", \"drover:schedule-export\"], got {command:?}"
                ));
            }
        }
        if schedule.retention_days == 0 {
            problems.push(
                "schedule.retention_days must be at least 1 (days of run history kept)".to_string(),
            );
        }
        if schedule.alerts.cooldown_secs == 0 {
            problems.push(
                "schedule.alerts.cooldown_secs must be at least 1 (seconds between two alerts for one task)".to_string(),
            );
        }
        if let Some(command) = &schedule.alerts.command {
            if command.is_empty() || command[0].is_empty() {
                problems.push(format!(
                    "schedule.alerts.command must name a program, e.g. [\"php\", \"artisan\", \"drover:long-wait\"], or be null, got {command:?}"
                ));
            }
        }
        if let Some(pool) = &schedule.fork_from {
            match self.pools.iter().find(|p| &p.name == pool) {
                None => problems.push(format!(
                    "schedule.fork_from names the pool {pool:?}, which is not in pools (pools: {}); name a pool in fork mode, or null to start each run by run_command",
                    self.pools.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ")
                )),
                Some(p) if p.spawn != SpawnMode::Fork => problems.push(format!(
                    "schedule.fork_from names the pool {pool:?}, which starts its workers by exec (spawn: exec): it has no zygote to fork runs from; name a pool in fork mode, or null"
                )),
                Some(_) => {}
            }
        }
    }

    /// The master's durations, the largest frame and how long failed jobs and metrics are kept.
    fn check_ranges(&self, problems: &mut Vec<String>) {
        for (name, secs) in [
            ("lease", self.lease),
            ("shutdown_grace", self.shutdown_grace),
            ("poll_interval", self.poll_interval),
            ("restart_pause", self.restart_pause),
        ] {
            check_seconds(problems, name, secs, false);
        }
        if self.max_frame_bytes == 0 || self.max_frame_bytes > MAX_FRAME_BYTES {
            problems.push(format!(
                "max_frame_bytes must be between 1 and {MAX_FRAME_BYTES}, got {}",
                self.max_frame_bytes
            ));
        }
        if self.failed_retention_days > MAX_RETENTION_DAYS {
            problems.push(format!(
                "failed_retention_days must be at most {MAX_RETENTION_DAYS} (0 keeps failed jobs forever), got {}",
                self.failed_retention_days
            ));
        }
        if self.metrics_trim > MAX_RETENTION_DAYS * 1440 {
            problems.push(format!(
                "metrics_trim must be at most {} minutes (0 keeps metrics forever), got {}",
                MAX_RETENTION_DAYS * 1440,
                self.metrics_trim
            ));
        }
    }

    /// The long-wait alerts: their cooldown, thresholds and command.
    fn check_long_waits(&self, problems: &mut Vec<String>) {
        check_seconds(
            problems,
            "long_waits.cooldown",
            self.long_waits.cooldown,
            false,
        );
        for (queue, secs) in &self.long_waits.thresholds {
            if *secs as f64 > MAX_SECONDS {
                problems.push(format!(
                    "long_waits.thresholds.{queue} must be at most {MAX_SECONDS} seconds (a year; 0 turns the alert off), got {secs}"
                ));
            }
        }
        if self
            .long_waits
            .command
            .as_ref()
            .is_some_and(|c| c.is_empty() || c[0].is_empty())
        {
            problems.push("long_waits.command must name a program (or be null)".to_string());
        }
    }

    /// The fleet-wide queue budgets, and the fair queues.
    fn check_budgets(&self, problems: &mut Vec<String>) {
        if self.fair_queues.contains("") {
            problems.push(
                "fair_queues names an empty queue: name the queue that is to be fair".to_string(),
            );
        }
        for (queue, budget) in &self.queue_budgets {
            if queue.is_empty() {
                problems.push(
                    "queue_budgets names an empty queue: name the queue the budget is for"
                        .to_string(),
                );
            }
            if *budget < 1 || *budget > MAX_BUDGET {
                problems.push(format!(
                    "queue_budgets.{queue} (drover.budgets in config/drover.php, or --budget) must be between 1 and {MAX_BUDGET} jobs (remove the key for no budget), got {budget}"
                ));
            }
        }
    }

    /// How long completed jobs are kept, and the metrics listener's address and token.
    fn check_history_and_listener(&self, problems: &mut Vec<String>) {
        if self.history_minutes > MAX_RETENTION_DAYS * 1440 {
            problems.push(format!(
                "history_minutes must be at most {} (0 keeps no history), got {}",
                MAX_RETENTION_DAYS * 1440,
                self.history_minutes
            ));
        }
        if let Some(addr) = &self.metrics_listen {
            if let Err(problem) = super::listen_address(addr) {
                problems.push(problem);
            }
        }
        if let Some(token) = &self.metrics_token {
            problems.extend(super::metrics_listener::token_problem(token.expose()));
        }
    }

    /// The shortest lease, the restart circuit, the reload command and the workers' user.
    fn check_lease_restarts_and_user(&self, problems: &mut Vec<String>) {
        if self.lease < MIN_LEASE_SECS {
            problems.push(format!(
                "lease must be at least {MIN_LEASE_SECS} s (a shorter one leaves renewals too little time before the lease guard stops a healthy worker), got {}",
                self.lease
            ));
        }
        if self.restart_failures == 0 {
            problems.push("restart_failures must be at least 1".to_string());
        }
        if self
            .reload_command
            .as_ref()
            .is_some_and(|c| c.is_empty() || c[0].is_empty())
        {
            problems.push("reload_command is empty; leave it out or give a program".to_string());
        }
        if self.user.as_ref().is_some_and(|u| u.trim().is_empty()) {
            problems.push("user is empty; leave it out or name an OS user".to_string());
        }
    }

    /// Each pool, and that no two share a name.
    fn check_pools(&self, problems: &mut Vec<String>) {
        let mut names = std::collections::HashSet::new();
        for pool in &self.pools {
            let p = &pool.name;
            if !names.insert(p.as_str()) {
                problems.push(format!("pool {p:?} is defined twice"));
            }
            check_pool(problems, pool);
        }
    }

    /// The settings that differ in `new` and that a running master cannot take over (a reload
    /// applies the pools; these wait for the next start).
    pub fn changes_needing_a_restart(&self, new: &RunConfig) -> Vec<&'static str> {
        [
            // The file leaves the URL out when it comes from the environment (as `php artisan
            // drover` exports it): only a URL written in the file is a change.
            (
                "database_url",
                new.database_url.is_some() && new.database_url != self.database_url,
            ),
            ("state_dir", new.state_dir != self.state_dir),
            ("lease", new.lease != self.lease),
            ("shutdown_grace", new.shutdown_grace != self.shutdown_grace),
            ("poll_interval", new.poll_interval != self.poll_interval),
            ("user", new.user != self.user),
            ("postgres_user", new.postgres_user != self.postgres_user),
            ("metrics_listen", new.metrics_listen != self.metrics_listen),
            ("metrics_token", new.metrics_token != self.metrics_token),
            ("record_metrics", new.record_metrics != self.record_metrics),
            ("metrics_trim", new.metrics_trim != self.metrics_trim),
            (
                "history_minutes",
                new.history_minutes != self.history_minutes,
            ),
        ]
        .into_iter()
        .filter_map(|(name, changed)| changed.then_some(name))
        .collect()
    }
}

/// One pool's own problems: its name, its queues, each option within its limit, its commands,
/// and how its processes cover its queues.
fn check_pool(problems: &mut Vec<String>, pool: &PoolSpec) {
    let p = &pool.name;
    if p.is_empty() || p.contains(':') {
        problems.push(format!(
            "pool {p:?}: a pool name must be non-empty and without ':' (balanced pools name their queues' workers pool:queue)"
        ));
    }
    if pool.queues.is_empty() || pool.queues.iter().any(|q| q.trim().is_empty()) {
        problems.push(format!(
            "pool {p:?}: queues must list at least one non-empty queue name"
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for q in &pool.queues {
        // A balanced pool would run two member pools of one name (`pool:queue`).
        if !seen.insert(q.as_str()) {
            problems.push(format!(
                "pool {p:?}: queue {q:?} is listed twice; list each queue once, in priority order"
            ));
        }
    }
    for (option, limit) in POOL_LIMITS {
        if let Some(problem) = problem(option, *limit, &pool.option(option)) {
            problems.push(format!("pool {p:?}: {problem}"));
        }
    }
    if pool.command.is_empty() {
        problems.push(format!("pool {p:?}: command is empty"));
    }
    if pool.zygote_command.as_ref().is_some_and(|c| c.is_empty()) {
        problems.push(format!(
            "pool {p:?}: zygote_command is empty; leave it out (the zygote then runs command) or give a program"
        ));
    }
    if let Some(problem) = coverage_problem(
        pool.balance,
        pool.processes,
        pool.min_processes,
        pool.max_processes(),
        pool.queues.len(),
    ) {
        problems.push(format!("pool {p:?}: {problem}"));
    }
}
