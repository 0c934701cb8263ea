//! Housekeeping: taking back expired leases of dead masters (reap), compacting a drained
//! `drover.jobs`, retention of `drover.failed_jobs`, and recycling workers over their pool's
//! memory limit (PSS from /proc).

use super::*;

/// How often retention of `drover.failed_jobs` runs.
const PURGE_EVERY: Duration = Duration::from_secs(3600);
/// The most time one retention pass spends deleting.
const PURGE_BUDGET: Duration = Duration::from_secs(10);
/// How often expired deduplication ids are deleted: each lives a window (5 minutes by default),
/// so an hourly pass would keep twelve windows of them.
const DEDUP_PURGE_EVERY: Duration = Duration::from_secs(60);

impl Master {
    /// Workers above their pool's memory limit (PSS, from /proc) finish their job and are
    /// replaced; the exit is planned, so it never counts as a crash.
    pub(super) fn recycle_workers_over_memory(&mut self) {
        for p in &mut self.pools {
            let Some(limit) = p.memory_limit_kib else {
                continue;
            };
            for id in p.pool.ids().collect::<Vec<_>>() {
                let Some(pid) = p.pool.pid(id) else {
                    continue;
                };
                // PSS never exceeds RSS, and RSS is a counter the kernel keeps (statm), while PSS
                // walks every page table (smaps_rollup): only a worker whose RSS is over the limit
                // costs that walk. (64 idle workers: 0.96% of a core with a walk each every 5 s.)
                if read_rss_kib(pid).is_some_and(|rss| rss <= limit) {
                    continue;
                }
                let Some(pss) = read_pss_kib(pid) else {
                    continue;
                };
                if pss > limit && p.recycle(id) {
                    tracing::warn!(
                        pool = p.pool.name(),
                        worker = id.0,
                        pss_mib = pss / 1024,
                        limit_mib = limit / 1024,
                        "worker {} uses {} MiB (PSS), over the pool's memory limit; it finishes its job and is replaced",
                        id.0,
                        pss / 1024
                    );
                }
            }
        }
    }

    /// Once the jobs that went through are all settled, gives back the space a drained backlog
    /// left in `drover.jobs` (see `drover_broker::compact`).
    pub(super) fn maybe_compact(&mut self) {
        if !self.compact_due
            || self.compacting
            || self.phase != Phase::Running
            || self.pools.iter().any(|p| p.assignments.held() > 0)
        {
            return;
        }
        self.compacting = true;
        let broker = self.broker.clone();
        let tx = self.internal_tx.clone();
        tokio::spawn(async move {
            let _ = tx.send(Internal::Compacted(broker.compact_when_empty().await));
        });
    }

    /// Retention: once an hour (and at start), deletes the failed jobs older than
    /// `failed_retention_days` (0 keeps them forever). Every master does it; the deletes are
    /// idempotent and batched, so two masters at once only share the work. At most
    /// [`PURGE_BUDGET`] per pass; what is left goes at the next.
    pub(super) fn maybe_purge_failed(&mut self) {
        let now = Instant::now();
        let days = self.reloading.current.failed_retention_days;
        if days == 0 || now < self.purge_due || self.phase != Phase::Running {
            return;
        }
        self.purge_due = now + PURGE_EVERY;
        // Checked by the configuration (at most MAX_RETENTION_DAYS), so this cannot overflow.
        let older_than = Duration::from_secs(days.saturating_mul(86_400));
        let broker = self.broker.clone();
        tokio::spawn(async move {
            match broker.purge_failed(older_than, PURGE_BUDGET).await {
                Ok(0) => {}
                Ok(deleted) => tracing::info!(
                    deleted,
                    days,
                    "retention: deleted failed jobs older than {days} days from drover.failed_jobs"
                ),
                Err(e) => {
                    tracing::warn!(database = %broker.address(), "retention of drover.failed_jobs: {e}")
                }
            }
        });
    }

    /// Retention of deduplication ids: every minute, deletes those whose window ended (at most
    /// [`PURGE_BUDGET`] per pass). Idempotent and batched, like the failed jobs' retention.
    pub(super) fn maybe_purge_dedup(&mut self) {
        let now = Instant::now();
        if now < self.dedup_purge_due || self.phase != Phase::Running {
            return;
        }
        self.dedup_purge_due = now + DEDUP_PURGE_EVERY;
        let broker = self.broker.clone();
        tokio::spawn(async move {
            match broker.purge_dedup(PURGE_BUDGET).await {
                Ok(0) => {}
                Ok(deleted) => {
                    tracing::debug!(deleted, "retention: deleted expired deduplication ids")
                }
                Err(e) => {
                    tracing::warn!(database = %broker.address(), "retention of drover.dedup: {e}")
                }
            }
        });
    }

    pub(super) fn start_reap(&mut self) {
        if self.reaping {
            return;
        }
        // Acks still waiting out an outage would be stale by the time they land if the reap took
        // their jobs back first (their leases ran out meanwhile): the finished jobs would run
        // again. Reaping waits until the settler has written them. (Another master may still
        // reap them: at-least-once, and the reason a lease must outlast a database restart.)
        if self.settles_held.load(std::sync::atomic::Ordering::Relaxed) {
            tracing::debug!("not reaping while settles wait for the database");
            return;
        }
        self.reaping = true;
        let broker = self.broker.clone();
        let tx = self.internal_tx.clone();
        tokio::spawn(async move {
            let limit = broker.lease_duration() / 2;
            let pass = async {
                // The status document goes with `publish_status` (every memory tick), on the side
                // connection: a heartbeat carrying an older one could land after a newer one.
                if let Err(e) = broker.heartbeat(None).await {
                    tracing::warn!(database = %broker.address(), "{e}");
                }
                broker.reap_expired().await
            };
            let result = tokio::time::timeout(limit, pass).await.unwrap_or_else(|_| {
                broker.suspect_connection();
                Err(drover_broker::BrokerError::TimedOut {
                    about: "taking back expired leases",
                })
            });
            match result {
                Ok(r) if r.released > 0 || r.failed > 0 => {
                    tracing::warn!(
                        released = r.released,
                        failed = r.failed,
                        "took back jobs whose lease expired (their master stopped renewing)"
                    );
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(database = %broker.address(), "{e}"),
            }
            let _ = tx.send(Internal::Reaped);
        });
    }

    pub(super) fn on_compacted(
        &mut self,
        result: Result<drover_broker::Compaction, drover_broker::BrokerError>,
    ) {
        self.compacting = false;
        match result {
            Ok(Compaction::Compacted { before, after }) => {
                self.compact_due = false;
                tracing::info!(
                    before_kib = before / 1024,
                    after_kib = after / 1024,
                    "the backlog is drained: vacuumed drover.jobs and rebuilt its indexes"
                );
            }
            Ok(Compaction::Small { .. }) | Ok(Compaction::NotEmpty) => self.compact_due = false,
            Ok(Compaction::Busy) => {
                tracing::debug!("drover.jobs was busy; compacting it at the next pass")
            }
            Err(e) => {
                tracing::warn!(database = %self.broker.address(), "compacting the drained drover.jobs: {e}")
            }
        }
    }
}

/// A process's resident set size, KiB, from `/proc/<pid>/statm` (cheap: a counter).
pub(super) fn read_rss_kib(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    let pages: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf only reads a constant.
    let page = unsafe { nix::libc::sysconf(nix::libc::_SC_PAGESIZE) };
    Some(pages * page.max(4096) as u64 / 1024)
}

/// A process's proportional set size, KiB, from `/proc/<pid>/smaps_rollup`.
pub fn read_pss_kib(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("Pss:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}
