//! The control socket's commands, and the status answer: pools, workers, circuits, totals,
//! the health verdict (`crate::rules::health`), and what the answer reads from the database —
//! each queue's backlog, groups, limits, the horizon, the workflows and the progress of the jobs
//! its workers run.

use std::time::{Duration, Instant};

use drover_supervisor::CircuitState;

use crate::master::pools::PoolRuntime;
use crate::process::control::{Command, Request};
use crate::process::memory::read_pss_kib;
use crate::rules::health::{self, PoolView};
use crate::rules::lease_deadlines;
use crate::status_document::{self as doc, Status};

use super::life::Phase;
use super::Master;

impl Master {
    pub(super) fn on_control(&mut self, request: Request) {
        // Whoever asked gave up waiting (a scrape that timed out while the loop was busy or not
        // yet running): nothing to compute.
        if request.reply.is_closed() {
            return;
        }
        let answer = match request.command {
            Command::Status => return self.answer_status(request.reply),
            Command::Health => status_value(&self.status(false)),
            Command::Pause | Command::Continue => {
                let paused = request.command == Command::Pause;
                match &request.pool {
                    None => {
                        self.set_paused(paused);
                        serde_json::json!({"ok": true, "paused": paused})
                    }
                    Some(name) => match self.set_pool_paused(name, paused) {
                        Ok(()) => serde_json::json!({"ok": true, "pool": name, "paused": paused}),
                        Err(e) => serde_json::json!({"error": e}),
                    },
                }
            }
            Command::Restart => {
                self.start_reload("restart command");
                serde_json::json!({"ok": true, "reloading": true})
            }
            Command::Terminate => {
                self.on_shutdown_signal("terminate command");
                serde_json::json!({"ok": true, "terminating": true})
            }
        };
        let _ = request.reply.send(answer);
    }

    /// The status document; `pss` reads each worker's PSS (a page-table walk per worker, from
    /// `/proc/<pid>/smaps_rollup`), which `drover status`, the node row and `/metrics` show and
    /// `/healthz` does not need.
    pub(super) fn status(&self, pss: bool) -> Status {
        let phase = match self.life.phase {
            Phase::Running => doc::Phase::Running,
            Phase::Draining { .. } => doc::Phase::Draining,
            Phase::Stopping => doc::Phase::Stopping,
        };
        let pools = self
            .pools
            .iter()
            .map(|p| self.pool_status(p, pss))
            .collect();
        let views: Vec<PoolView> = self
            .pools
            .iter()
            .map(|p| PoolView {
                name: p.pool().name().to_string(),
                wanted: p.pool().target(),
                serving: p.pool().serving(),
                circuit_open: matches!(p.pool().circuit(), CircuitState::Open { .. }),
                failures_in_a_row: p.pool().failures_in_a_row(),
                retired: p.retired,
                paused: p.paused,
            })
            .collect();
        let database = self.life.database.problem(Instant::now());
        let verdict = health::assess(
            self.life.running(),
            self.life.paused,
            database.as_ref(),
            &views,
        );
        Status {
            pid: std::process::id(),
            master_pss_kib: if pss {
                read_pss_kib(std::process::id())
            } else {
                None
            },
            node: self.store.node(),
            health: verdict.health,
            exit_code: verdict.exit_code,
            problems: verdict.problems,
            database_unreachable_secs: database.as_ref().map(|p| p.secs()),
            phase,
            paused: self.life.paused,
            paused_queues: self.claimer.pauses().status(tokio::time::Instant::now()),
            queue_budgets: self.reconfig.reloading.current.queue_budgets.clone(),
            fair_queues: self
                .reconfig
                .reloading
                .current
                .fair_queues
                .iter()
                .cloned()
                .collect(),
            reloading: self.reconfig.rereads.running(),
            fleet_restart_answered: self.reconfig.fleet_reload.done(),
            pools,
            totals: self.totals(),
            backlog: None,
            oldest_wait_secs: None,
            groups: None,
            limits: None,
            schedule: None,
            schedulers_beside: None,
            horizon: None,
            progress: None,
            workflows: None,
        }
    }

    fn pool_status(&self, p: &PoolRuntime, pss: bool) -> doc::PoolStatus {
        let autoscaling = self
            .reconfig
            .autoscaling
            .of_member(p.pool().name())
            .map(|b| doc::Autoscaling {
                pool: b.name.clone(),
                min_processes: b.min,
                max_processes: b.max,
                runtime_ms: p.runtime.map(|r| r.as_secs_f64() * 1000.0),
            });
        doc::PoolStatus {
            name: p.pool().name().to_string(),
            queues: p.queues.clone(),
            processes: p.pool().target(),
            serving: p.pool().serving(),
            generation: p.pool().generation(),
            memory_limit_kib: p.memory_limit_kib,
            circuit: circuit_status(p.pool().circuit()),
            failures_in_a_row: p.pool().failures_in_a_row(),
            restarts: p.restarts,
            retired: p.retired,
            outage: Some(outage(
                self.store.lease_duration(),
                p.policy.outage_grace,
                self.store.grace_in_force(),
            )),
            paused: p.paused,
            autoscaling,
            spawn: spawn_status(p, pss),
            workers: workers_status(p, pss),
        }
    }

    /// Status with each queue's backlog and the other database figures (the running jobs'
    /// progress, the workflows …), read by a task so the loop never waits on them.
    pub(super) fn answer_status(&self, reply: tokio::sync::oneshot::Sender<serde_json::Value>) {
        let mut status = self.status(true);
        let mut queues: Vec<String> = self.pools.iter().flat_map(|p| p.queues.clone()).collect();
        queues.sort();
        queues.dedup();
        let running = running_jobs(&status);
        let store = self.store.clone();
        let schedule = self.upkeep.schedule.clone();
        tokio::spawn(async move {
            let schedule_status = async {
                match &schedule {
                    Some(view) => {
                        tokio::time::timeout(ANSWER_WAIT, view.status(jiff::Timestamp::now())).await
                    }
                    None => Ok(None),
                }
            };
            let beside_status = async {
                match &schedule {
                    Some(view) => tokio::time::timeout(ANSWER_WAIT, view.beside()).await,
                    None => Ok(None),
                }
            };
            let (counted, oldest, groups, limits, schedule, beside, horizon, progress, workflows) = tokio::join!(
                tokio::time::timeout(ANSWER_WAIT, store.backlog(&queues, 100_000)),
                tokio::time::timeout(ANSWER_WAIT, store.oldest_waits(&queues)),
                tokio::time::timeout(ANSWER_WAIT, async {
                    let stats = store.group_stats(&queues, GROUPS_COUNTED).await?;
                    let held = store.held_groups(&queues, HELD_GROUPS_SHOWN).await?;
                    Ok::<_, drover_broker::BrokerError>(groups_status(&stats, &held))
                }),
                tokio::time::timeout(ANSWER_WAIT, store.limit_keys(LIMIT_KEYS_SHOWN)),
                schedule_status,
                beside_status,
                tokio::time::timeout(ANSWER_WAIT, store.horizon()),
                tokio::time::timeout(ANSWER_WAIT, store.job_progress(&running)),
                tokio::time::timeout(ANSWER_WAIT, store.workflow_counts()),
            );
            status.progress = Some(counted_or_why(progress).map(progress_status));
            status.workflows = Some(counted_or_why(workflows).map(workflows_status));
            status.schedulers_beside = match beside {
                Ok(None) => None,
                Ok(Some(read)) => Some(counted_or_why(Ok(read))),
                Err(elapsed) => Some(counted_or_why::<Vec<doc::SchedulerBeside>>(Err(elapsed))),
            };
            status.horizon = Some(counted_or_why(horizon).map(horizon_status));
            status.schedule = match schedule {
                Ok(None) => None,
                Ok(Some(read)) => Some(counted_or_why(Ok(read))),
                Err(elapsed) => Some(counted_or_why::<Vec<doc::ScheduledTask>>(Err(elapsed))),
            };
            status.limits = Some(counted_or_why(limits).map(|keys| {
                keys.into_iter()
                    .map(|k| doc::LimitKey {
                        key: k.key,
                        waiting: k.waiting,
                        held: k.held,
                        rate_used: k.rate_used,
                        window_ends_in_secs: k.window_ends_in.map(|d| d.as_secs_f64()),
                        oldest_wait_secs: k.oldest_wait.map(|d| d.as_secs_f64()),
                    })
                    .collect()
            }));
            status.groups = Some(counted_or_why(groups));
            status.oldest_wait_secs = Some(counted_or_why(oldest).map(|rows| {
                queues
                    .iter()
                    .map(|q| {
                        let secs = rows
                            .iter()
                            .find(|(name, _)| name == q)
                            .map(|(_, waited)| waited.as_secs_f64())
                            .unwrap_or(0.0);
                        (q.clone(), secs)
                    })
                    .collect()
            }));
            status.backlog = Some(counted_or_why(counted).map(|rows| rows.into_iter().collect()));
            let _ = reply.send(status_value(&status));
        });
    }

    /// Writes the status into this master's node row (every memory tick, 5 s by default), so the
    /// dashboard and other hosts see workers as they are, not as at the last heartbeat.
    pub(super) fn publish_status(&mut self) {
        if !self.life.running()
            || self
                .upkeep
                .status_write
                .as_ref()
                .is_some_and(|t| !t.is_finished())
        {
            return;
        }
        let status = self.status(true);
        self.upkeep.row_says_unreachable = status.database_unreachable_secs.is_some();
        // Straight to text: the node row wants JSON, not a Value built first.
        let Ok(status) = serde_json::to_string(&status) else {
            return;
        };
        let store = self.store.clone();
        self.upkeep.status_write = Some(tokio::spawn(async move {
            if let Err(e) = store.publish_status(&status).await {
                tracing::debug!("{e}");
            }
        }));
    }
}

impl Master {
    /// The status row was last written saying the database is unreachable (the write may even
    /// have landed: the calls that tell are not the row's): once it is reachable, the row is
    /// written again at once, not at the next memory tick, so the dashboard does not show a
    /// master cut off that is not.
    pub(super) fn republish_once_reachable(&mut self) {
        if self.upkeep.row_says_unreachable && self.life.database.reachable() {
            self.publish_status();
        }
    }
}

/// The horizon as the status document says it.
fn horizon_status(h: drover_broker::Horizon) -> doc::Horizon {
    doc::Horizon {
        oldest: h.oldest.map(|o| doc::SnapshotHolder {
            kind: o.kind.as_str().to_string(),
            pid: o.pid,
            name: o.name,
            role: o.role,
            state: o.state,
            xid_age: o.xid_age,
            open_secs: o.open_for.map(|d| d.as_secs_f64()),
            query: o.query,
        }),
        jobs_dead_tuples: h.jobs_dead_tuples,
        sees_all_sessions: h.sees_all_sessions,
    }
}

/// The jobs this master's workers run, by id (each worker runs one at a time): whose progress
/// the answer reads.
fn running_jobs(status: &Status) -> Vec<i64> {
    let mut jobs: Vec<i64> = status
        .pools
        .iter()
        .flat_map(|p| &p.workers)
        .filter_map(|w| w.running)
        .collect();
    jobs.sort_unstable();
    jobs.dedup();
    jobs
}

/// The progress reports as the status document says them, by job id.
fn progress_status(
    reports: Vec<drover_broker::JobProgress>,
) -> std::collections::BTreeMap<String, doc::JobProgress> {
    reports
        .into_iter()
        .map(|p| {
            (
                p.job.to_string(),
                doc::JobProgress {
                    percent: p.percent,
                    note: p.note,
                    reported_secs_ago: p.reported_ago.as_secs_f64(),
                },
            )
        })
        .collect()
}

/// The workflow counts as the status document says them.
fn workflows_status(c: drover_broker::WorkflowCounts) -> doc::Workflows {
    doc::Workflows {
        pending: c.pending,
        running: c.running,
        nodes_waiting_for_signal: c.nodes_waiting_for_signal,
        nodes_waiting_for_time: c.nodes_waiting_for_time,
        failed_last_hour: c.failed_last_hour,
    }
}

/// Groups counted per queue for status: a count is cheap to this size and says "many" beyond.
const GROUPS_COUNTED: i64 = 100_000;
/// Keys jobs wait for listed in status (and exposed in the metrics), most waited for first.
const LIMIT_KEYS_SHOWN: i64 = 20;
/// Held groups listed in status, oldest first.
const HELD_GROUPS_SHOWN: i64 = 20;

/// How long the status answer waits for each of its database figures.
const ANSWER_WAIT: Duration = Duration::from_secs(2);

/// A figure the answer asked the database for, or why it is missing.
fn counted_or_why<T>(
    result: Result<Result<T, drover_broker::BrokerError>, tokio::time::error::Elapsed>,
) -> doc::ReadOrWhy<T> {
    match result {
        Ok(Ok(value)) => doc::ReadOrWhy::Read(value),
        Ok(Err(e)) => doc::ReadOrWhy::Failed {
            error: e.to_string(),
        },
        Err(_) => doc::ReadOrWhy::Failed {
            error: format!("the database did not answer in {} s", ANSWER_WAIT.as_secs()),
        },
    }
}

impl<T> doc::ReadOrWhy<T> {
    fn map<U>(self, f: impl FnOnce(T) -> U) -> doc::ReadOrWhy<U> {
        match self {
            doc::ReadOrWhy::Read(value) => doc::ReadOrWhy::Read(f(value)),
            doc::ReadOrWhy::Failed { error } => doc::ReadOrWhy::Failed { error },
        }
    }
}

/// The document as the control socket sends it. Its types serialize without fail (strings,
/// numbers, maps with string keys).
pub(super) fn status_value(status: &Status) -> serde_json::Value {
    serde_json::to_value(status).unwrap_or_else(|e| serde_json::json!({"error": e.to_string()}))
}

/// The status document's `groups`.
fn groups_status(
    stats: &[drover_broker::GroupStats],
    held: &[drover_broker::HeldGroup],
) -> doc::Groups {
    doc::Groups {
        queues: stats
            .iter()
            .map(|s| {
                (
                    s.queue.clone(),
                    doc::QueueGroups {
                        groups: s.groups,
                        held: s.held,
                        waiting: s.waiting,
                        oldest_head_secs: s.oldest_head.map(|d| d.as_secs_f64()),
                    },
                )
            })
            .collect(),
        held: held
            .iter()
            .map(|h| doc::HeldGroup {
                queue: h.queue.clone(),
                group: h.group.clone(),
                job: h.job,
                uuid: h.uuid.clone(),
                error: h.error.clone(),
                since: h.since,
                waiting: h.waiting,
            })
            .collect(),
    }
}

/// What an outage does to a pool's running jobs with this lease and grace (none when it is not
/// in force).
fn outage(lease: Duration, grace: Duration, in_force: bool) -> doc::Outage {
    let configured = grace;
    let grace = if in_force { grace } else { Duration::ZERO };
    let (shortest, longest) = lease_deadlines::outage_outlived(lease, grace);
    doc::Outage {
        grace_secs: configured.as_secs_f64(),
        in_force,
        outlives_secs: [shortest.as_secs_f64(), longest.as_secs_f64()],
        lost_host_return_secs: lease_deadlines::lost_host_return(lease, grace).as_secs_f64(),
    }
}

/// Each worker of a pool as status shows it; `pss` reads its PSS.
fn workers_status(p: &PoolRuntime, pss: bool) -> Vec<doc::WorkerStatus> {
    p.pool()
        .workers()
        .iter()
        .map(|w| {
            let line = p.assignments.status(w.id);
            doc::WorkerStatus {
                id: w.id.0,
                pid: w.pid,
                state: p.shown_state(w.id).to_string(),
                generation: w.generation,
                held: line.as_ref().map(|l| l.held).unwrap_or(0),
                running: line.as_ref().and_then(|l| l.running),
                finished: line.as_ref().map(|l| l.finished).unwrap_or(0),
                pss_kib: if pss && w.pid != 0 {
                    read_pss_kib(w.pid)
                } else {
                    None
                },
                forked: w.forked,
                uptime_secs: w.spawned_at.elapsed().as_secs(),
            }
        })
        .collect()
}

/// A pool's restart circuit as status shows it.
fn circuit_status(circuit: CircuitState) -> doc::Circuit {
    match circuit {
        CircuitState::Closed => doc::Circuit::Closed,
        CircuitState::Open { until } => doc::Circuit::Open {
            retry_in_secs: until
                .saturating_duration_since(Instant::now())
                .as_secs_f64(),
        },
        CircuitState::HalfOpen { .. } => doc::Circuit::HalfOpen,
    }
}

/// How a pool starts its workers (exec, or forked from its zygote line), as status shows it.
fn spawn_status(p: &PoolRuntime, pss: bool) -> doc::Spawn {
    match p.pool().line() {
        Some(line) => {
            let z = line.status();
            doc::Spawn {
                mode: z.mode.to_string(),
                zygote: Some(doc::Zygote {
                    state: z.state.to_string(),
                    pid: z.pid,
                    pss_kib: z.pid.filter(|_| pss).and_then(read_pss_kib),
                    generation: z.generation,
                }),
                fell_back: z.fell_back,
            }
        }
        None => doc::Spawn {
            mode: "exec".to_string(),
            zygote: None,
            fell_back: None,
        },
    }
}
