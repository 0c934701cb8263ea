//! The control socket's commands, and the status answer: pools, workers, circuits, totals,
//! the health verdict (`crate::rules::health`) and each queue's backlog.

use super::*;

impl Master {
    pub(super) fn on_control(&mut self, request: Request) {
        // Whoever asked gave up waiting (a scrape that timed out while the loop was busy or not
        // yet running): nothing to compute.
        if request.reply.is_closed() {
            return;
        }
        let answer = match request.command {
            Command::Status => return self.answer_status(request.reply),
            Command::Health => self.status(false),
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
    pub(super) fn status(&self, pss: bool) -> serde_json::Value {
        let phase = match self.phase {
            Phase::Running => "running",
            Phase::Draining { .. } => "draining",
            Phase::Stopping => "stopping",
        };
        let pools: Vec<_> = self
            .pools
            .ids()
            .map(|index| {
                let p = &self.pools[index];
                let autoscaling = self
                    .balancers
                    .iter()
                    .find(|b| b.members.iter().any(|m| m == p.pool.name()))
                    .map(|b| {
                        serde_json::json!({
                            "pool": b.name,
                            "min_processes": b.min,
                            "max_processes": b.max,
                            "runtime_ms": p.runtime.map(|r| r.as_secs_f64() * 1000.0),
                        })
                    });
                let workers: Vec<_> = p
                    .pool
                    .workers()
                    .iter()
                    .map(|w| {
                        let line = p.assignments.status(w.id);
                        let state = p.shown_state(w.id);
                        serde_json::json!({
                            "id": w.id.0,
                            "pid": w.pid,
                            "state": state,
                            "generation": w.generation,
                            "held": line.as_ref().map(|l| l.held).unwrap_or(0),
                            "running": line.as_ref().and_then(|l| l.running),
                            "finished": line.as_ref().map(|l| l.finished).unwrap_or(0),
                            "pss_kib": if pss && w.pid != 0 { read_pss_kib(w.pid) } else { None },
                            "forked": w.forked,
                            "uptime_secs": w.spawned_at.elapsed().as_secs(),
                        })
                    })
                    .collect();
                let circuit = match p.pool.circuit() {
                    CircuitState::Closed => serde_json::json!({"state": "closed"}),
                    CircuitState::Open { until } => serde_json::json!({
                        "state": "open",
                        "retry_in_secs": until.saturating_duration_since(Instant::now()).as_secs_f64(),
                    }),
                    CircuitState::HalfOpen { .. } => serde_json::json!({"state": "half_open"}),
                };
                serde_json::json!({
                    "name": p.pool.name(),
                    "queues": p.queues,
                    "processes": p.pool.target(),
                    "serving": p.pool.serving(),
                    "generation": p.pool.generation(),
                    "memory_limit_kib": p.memory_limit_kib,
                    "circuit": circuit,
                    "failures_in_a_row": p.pool.failures_in_a_row(),
                    "restarts": p.restarts,
                    "retired": p.retired,
                    "paused": p.paused,
                    "autoscaling": autoscaling,
                    "spawn": match p.pool.line() {
                        Some(line) => {
                            let z = line.status();
                            serde_json::json!({
                                "mode": z.mode,
                                "zygote": {
                                    "state": z.state,
                                    "pid": z.pid,
                                    "pss_kib": z.pid.filter(|_| pss).and_then(read_pss_kib),
                                    "generation": z.generation,
                                },
                                "fell_back": z.fell_back,
                            })
                        }
                        None => serde_json::json!({"mode": "exec"}),
                    },
                    "workers": workers,
                })
            })
            .collect();
        let views: Vec<PoolView> = self
            .pools
            .iter()
            .map(|p| PoolView {
                name: p.pool.name().to_string(),
                wanted: p.pool.target(),
                serving: p.pool.serving(),
                circuit_open: matches!(p.pool.circuit(), CircuitState::Open { .. }),
                failures_in_a_row: p.pool.failures_in_a_row(),
                retired: p.retired,
                paused: p.paused,
            })
            .collect();
        let (health, problems) = health::assess(self.phase == Phase::Running, self.paused, &views);
        serde_json::json!({
            "pid": std::process::id(),
            "master_pss_kib": if pss { read_pss_kib(std::process::id()) } else { None },
            "node": self.broker.node(),
            "health": health,
            "exit_code": health.exit_code(),
            "problems": problems,
            "phase": phase,
            "paused": self.paused,
            "paused_queues": self.queue_pauses.status(),
            "reloading": self.reload_running,
            "pools": pools,
            "totals": self.tally,
        })
    }

    /// Status with each queue's backlog, counted by a task so the loop never waits on it.
    pub(super) fn answer_status(&self, reply: tokio::sync::oneshot::Sender<serde_json::Value>) {
        let mut status = self.status(true);
        let mut queues: Vec<String> = self.pools.iter().flat_map(|p| p.queues.clone()).collect();
        queues.sort();
        queues.dedup();
        let broker = self.broker.clone();
        tokio::spawn(async move {
            let (counted, oldest, groups) = tokio::join!(
                tokio::time::timeout(Duration::from_secs(2), broker.backlog(&queues, 100_000)),
                tokio::time::timeout(Duration::from_secs(2), broker.oldest_waits(&queues)),
                tokio::time::timeout(Duration::from_secs(2), async {
                    let stats = broker.group_stats(&queues, GROUPS_COUNTED).await?;
                    let held = broker.held_groups(&queues, HELD_GROUPS_SHOWN).await?;
                    Ok::<_, drover_broker::BrokerError>(groups_status(&stats, &held))
                }),
            );
            status["groups"] = match groups {
                Ok(Ok(groups)) => groups,
                Ok(Err(e)) => serde_json::json!({"error": e.to_string()}),
                Err(_) => serde_json::json!({"error": "the database did not answer in 2 s"}),
            };
            status["oldest_wait_secs"] = match oldest {
                Ok(Ok(rows)) => queues
                    .iter()
                    .map(|q| {
                        let secs = rows
                            .iter()
                            .find(|(name, _)| name == q)
                            .map(|(_, waited)| waited.as_secs_f64())
                            .unwrap_or(0.0);
                        (q.clone(), serde_json::json!(secs))
                    })
                    .collect::<serde_json::Map<_, _>>()
                    .into(),
                Ok(Err(e)) => serde_json::json!({"error": e.to_string()}),
                Err(_) => serde_json::json!({"error": "the database did not answer in 2 s"}),
            };
            status["backlog"] = match counted {
                Ok(Ok(rows)) => rows
                    .into_iter()
                    .map(|(q, n)| (q, serde_json::json!(n)))
                    .collect::<serde_json::Map<_, _>>()
                    .into(),
                Ok(Err(e)) => serde_json::json!({"error": e.to_string()}),
                Err(_) => serde_json::json!({"error": "the database did not answer in 2 s"}),
            };
            let _ = reply.send(status);
        });
    }

    /// Writes the status into this master's node row (every memory tick, 5 s by default), so the
    /// dashboard and other hosts see workers as they are, not as at the last heartbeat.
    pub(super) fn publish_status(&mut self) {
        if self.phase != Phase::Running
            || self.status_write.as_ref().is_some_and(|t| !t.is_finished())
        {
            return;
        }
        let status = self.status(true).to_string();
        let broker = self.broker.clone();
        self.status_write = Some(tokio::spawn(async move {
            if let Err(e) = broker.publish_status(&status).await {
                tracing::debug!("{e}");
            }
        }));
    }
}

/// Groups counted per queue for status: a count is cheap to this size and says "many" beyond.
const GROUPS_COUNTED: i64 = 100_000;
/// Held groups listed in status, oldest first.
const HELD_GROUPS_SHOWN: i64 = 20;

/// The status document's `groups`: `{"queues": {queue: {groups, held, waiting,
/// oldest_head_secs}}, "held": [{queue, group, job, uuid, error, since, waiting}]}`.
fn groups_status(
    stats: &[drover_broker::GroupStats],
    held: &[drover_broker::HeldGroup],
) -> serde_json::Value {
    let queues: serde_json::Map<String, serde_json::Value> = stats
        .iter()
        .map(|s| {
            (
                s.queue.clone(),
                serde_json::json!({
                    "groups": s.groups,
                    "held": s.held,
                    "waiting": s.waiting,
                    "oldest_head_secs": s.oldest_head.map(|d| d.as_secs_f64()),
                }),
            )
        })
        .collect();
    let held: Vec<serde_json::Value> = held
        .iter()
        .map(|h| {
            serde_json::json!({
                "queue": h.queue,
                "group": h.group,
                "job": h.job,
                "uuid": h.uuid,
                "error": h.error,
                "since": h.since,
                "waiting": h.waiting,
            })
        })
        .collect();
    serde_json::json!({"queues": queues, "held": held})
}
