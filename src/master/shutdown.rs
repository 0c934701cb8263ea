//! Shutting down and pausing: a graceful drain (running jobs finish, the rest go back), an
//! immediate stop, and pause / continue from the control socket or SIGUSR2 / SIGCONT.

use crate::master::pools::runtime::is_member_of;
use crate::master::pools::PoolId;

use super::life::Phase;
use super::Master;

impl Master {
    /// A graceful shutdown, for `why` (a signal's name, a control command): running jobs get the
    /// shutdown grace. During a master's own drain (`--max-time` …, no deadline) it sets that
    /// grace; a second one while a grace runs stops at once.
    pub(super) fn on_shutdown_signal(&mut self, why: &str) {
        let grace = tokio::time::Instant::now() + self.config.shutdown_grace;
        match self.life.phase {
            Phase::Running => self.begin_drain(why, Some(grace)),
            Phase::Draining { deadline: None } => {
                tracing::info!(signal = why, grace = ?self.config.shutdown_grace, "graceful shutdown asked during the drain: jobs still running at the end of the grace are killed");
                self.life.phase = Phase::Draining {
                    deadline: Some(grace),
                };
            }
            _ => self.stop_now(why),
        }
    }

    /// Workers finish their running job (killed at `deadline`, if any), prefetched jobs go back.
    /// Only from `Running`: a master already stopping has nothing more to begin.
    pub(super) fn begin_drain(&mut self, why: &str, deadline: Option<tokio::time::Instant>) {
        if !self.life.running() {
            return;
        }
        self.life.notifier.stopping();
        match deadline {
            Some(_) => tracing::info!(cause = why, grace = ?self.config.shutdown_grace, "graceful shutdown: finishing running jobs, returning the rest"),
            None => tracing::info!(cause = why, "graceful shutdown: finishing running jobs (each under its own timeout), returning the rest"),
        }
        self.life.phase = Phase::Draining { deadline };
        self.shut_down_zygotes();
        for p in &mut self.pools {
            p.stop_all();
        }
    }

    pub(super) fn stop_now(&mut self, name: &str) {
        self.life.notifier.stopping();
        tracing::warn!(
            signal = name,
            "immediate shutdown: killing every worker and releasing its leases"
        );
        self.life.phase = Phase::Stopping;
        self.shut_down_zygotes();
        for p in &mut self.pools {
            p.kill_all();
        }
    }

    /// No more forks; each zygote exits with its last worker.
    fn shut_down_zygotes(&mut self) {
        if let Some(zygotes) = &self.reconfig.reloading.context.zygotes {
            zygotes.shut_down();
        }
    }

    /// Pause: no worker gets another job and each is told to start none it holds. Continue: undo
    /// (a pool paused on its own stays paused).
    pub(super) fn set_paused(&mut self, paused: bool) {
        if self.life.paused == paused {
            return;
        }
        self.life.paused = paused;
        if paused {
            tracing::info!("paused: no more jobs are handed out");
        } else {
            tracing::info!("continuing: handing out jobs again");
        }
        for index in self.pools.ids() {
            self.apply_pause(index);
        }
    }

    /// `drover pause --pool NAME` / `continue --pool NAME`: the pool of that name, and the
    /// per-queue members of a balanced pool of that name (`NAME:queue`).
    pub(super) fn set_pool_paused(&mut self, name: &str, paused: bool) -> Result<(), String> {
        let matching: Vec<PoolId> = self
            .pools
            .ids()
            .filter(|&i| !self.pools[i].retired && is_member_of(self.pools[i].pool().name(), name))
            .collect();
        if matching.is_empty() {
            let names: Vec<&str> = self
                .pools
                .iter()
                .filter(|p| !p.retired)
                .map(|p| p.pool().name())
                .collect();
            return Err(format!(
                "no pool named {name:?} (pools: {})",
                names.join(", ")
            ));
        }
        for index in matching {
            if self.pools[index].paused != paused {
                self.pools[index].paused = paused;
                tracing::info!(
                    pool = self.pools[index].pool().name(),
                    "{}",
                    if paused {
                        "pool paused: its workers get no more jobs"
                    } else {
                        "pool continuing: its workers get jobs again"
                    }
                );
                self.apply_pause(index);
            }
        }
        Ok(())
    }

    /// Brings a pool's workers in line with whether it is paused (master-wide or on its own).
    fn apply_pause(&mut self, index: PoolId) {
        let paused = self.life.paused || self.pools[index].paused;
        self.pools[index].follow_pause(paused);
        self.claimer.set_wanted(index, !paused);
    }

    /// A graceful shutdown's grace is over: kill what still runs.
    pub(super) fn grace_over(&mut self) {
        tracing::warn!(grace = ?self.config.shutdown_grace, live = self.live_workers(), "shutdown grace period over; killing the workers still running");
        self.life.phase = Phase::Stopping;
        for p in &mut self.pools {
            p.kill_all();
        }
    }
}
