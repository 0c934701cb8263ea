//! Shutting down and pausing: a graceful drain (running jobs finish, the rest go back), an
//! immediate stop, and pause / continue from the control socket or SIGUSR2 / SIGCONT.

use super::*;

impl Master {
    pub(super) fn on_shutdown_signal(&mut self, name: &str) {
        match self.phase {
            Phase::Running => {
                self.notifier.stopping();
                let deadline = tokio::time::Instant::now() + self.config.shutdown_grace;
                tracing::info!(signal = name, grace = ?self.config.shutdown_grace, "graceful shutdown: finishing running jobs, returning the rest");
                self.phase = Phase::Draining { deadline };
                for p in &mut self.pools {
                    p.pool.shut_down();
                    for id in p.pool.ids().collect::<Vec<_>>() {
                        p.ledger.transition(id, Transition::Retire);
                    }
                    p.pool.control_all(Control::Stop);
                }
            }
            _ => self.stop_now(name),
        }
    }

    pub(super) fn stop_now(&mut self, name: &str) {
        self.notifier.stopping();
        tracing::warn!(
            signal = name,
            "immediate shutdown: killing every worker and releasing its leases"
        );
        self.phase = Phase::Stopping;
        for p in &mut self.pools {
            p.pool.shut_down();
            p.pool.control_all(Control::Kill);
        }
    }

    /// Pause: no worker gets another job and each is told to start none it holds. Continue: undo.
    pub(super) fn set_paused(&mut self, paused: bool) {
        if self.paused == paused {
            return;
        }
        self.paused = paused;
        if paused {
            tracing::info!("paused: no more jobs are handed out");
        } else {
            tracing::info!("continuing: handing out jobs again");
        }
        let (transition, control) = if paused {
            (Transition::Pause, Control::Pause)
        } else {
            (Transition::Continue, Control::Resume)
        };
        for p in &mut self.pools {
            for id in p.pool.ids().collect::<Vec<_>>() {
                // Only workers the pause or continue really moves are told: a retiring, fenced or
                // timed-out worker stays as it is (workers still starting learn it at hello).
                let before = p.ledger.state(id);
                if before.is_some() && p.ledger.transition(id, transition) != before {
                    p.pool.control(id, control);
                }
            }
            p.claim_wanted = !paused;
        }
    }

    /// A graceful shutdown's grace is over: kill what still runs.
    pub(super) fn grace_over(&mut self) {
        tracing::warn!(grace = ?self.config.shutdown_grace, live = self.live_workers(), "shutdown grace period over; killing the workers still running");
        self.phase = Phase::Stopping;
        for p in &self.pools {
            p.pool.control_all(Control::Kill);
        }
    }
}
