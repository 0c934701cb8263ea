//! The restart circuit breaker of a pool.
//!
//! Backoff slows a boot loop down; the circuit stops it. After `failures` boot failures in a row
//! (a worker that died before its hello, or never said hello in time) the circuit opens: no
//! worker of the pool is started for `open_for`. Then it lets one probe through (half-open). If
//! the probe says hello the circuit closes and the empty places are filled; if it fails to boot,
//! the circuit opens again, for twice as long (up to `open_max`).
//!
//! ```text
//!            failures in a row ≥ threshold
//!   Closed ────────────────────────────────▶ Open{until}
//!     ▲                                        │ until passed
//!     │ probe said hello                       ▼
//!     └──────────────────────────────────── HalfOpen ──probe died early──▶ Open{until'}
//! ```
//!
//! Deaths in service (after hello) never count (see `crate::pool`), nor do planned exits (memory
//! limit, max_jobs, max_time, timeout kill, restart request).

use std::time::{Duration, Instant};

/// The circuit's settings.
#[derive(Debug, Clone)]
pub struct CircuitConfig {
    /// Early deaths in a row that open the circuit. Default 5.
    pub failures: u32,
    /// How long it stays open the first time. Default 30 s.
    pub open_for: Duration,
    /// The longest it stays open after repeated failed probes. Default 5 min.
    pub open_max: Duration,
}

impl Default for CircuitConfig {
    fn default() -> Self {
        CircuitConfig {
            failures: 5,
            open_for: Duration::from_secs(30),
            open_max: Duration::from_secs(300),
        }
    }
}

/// Where the circuit is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CircuitState {
    /// Workers start (after their backoff) as usual.
    Closed,
    /// No worker starts until `until`.
    Open { until: Instant },
    /// One probe worker may run; no other starts until it is healthy.
    HalfOpen { probe_started: bool },
}

/// What the pool may do about starting a worker now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MayStart {
    Yes,
    /// Yes, and this worker is the probe.
    Probe,
    /// Not before this instant.
    NotUntil(Instant),
    /// Not while the probe has not proved itself.
    WaitForProbe,
}

#[derive(Debug, Clone)]
pub struct Circuit {
    config: CircuitConfig,
    state: CircuitState,
    /// Early deaths since the last healthy worker.
    in_a_row: u32,
    /// How long the next opening lasts.
    next_open_for: Duration,
}

impl Circuit {
    pub fn new(config: CircuitConfig) -> Circuit {
        let next_open_for = config.open_for;
        Circuit {
            config,
            state: CircuitState::Closed,
            in_a_row: 0,
            next_open_for,
        }
    }

    pub fn state(&self) -> CircuitState {
        self.state
    }

    /// Early deaths since the last healthy worker.
    pub fn failures_in_a_row(&self) -> u32 {
        self.in_a_row
    }

    /// A worker died before it was healthy. Returns true if this opened the circuit.
    pub fn on_early_death(&mut self, now: Instant) -> bool {
        self.in_a_row = self.in_a_row.saturating_add(1);
        let open = match self.state {
            CircuitState::Closed => self.in_a_row >= self.config.failures.max(1),
            CircuitState::HalfOpen { .. } => true,
            CircuitState::Open { .. } => false,
        };
        if open {
            self.state = CircuitState::Open {
                until: now + self.next_open_for,
            };
            self.next_open_for = (self.next_open_for * 2).min(self.config.open_max);
        }
        open
    }

    /// A worker became healthy. Returns true if this closed an open or half-open circuit.
    pub fn on_healthy(&mut self) -> bool {
        self.in_a_row = 0;
        self.next_open_for = self.config.open_for;
        let was_open = self.state != CircuitState::Closed;
        self.state = CircuitState::Closed;
        was_open
    }

    /// A reload brought new code, and the rules it runs by (`config`): the old code's failures
    /// no longer count. Closed, with no early death in a row and the first pause length again;
    /// new code that dies early opens it anew.
    pub fn reset(&mut self, config: CircuitConfig) {
        self.config = config;
        self.state = CircuitState::Closed;
        self.in_a_row = 0;
        self.next_open_for = self.config.open_for;
    }

    /// Asks to start a worker now; a `Probe` answer is recorded (only one probe at a time).
    pub fn may_start(&mut self, now: Instant) -> MayStart {
        match self.state {
            CircuitState::Closed => MayStart::Yes,
            CircuitState::Open { until } if now < until => MayStart::NotUntil(until),
            CircuitState::Open { .. }
            | CircuitState::HalfOpen {
                probe_started: false,
            } => {
                self.state = CircuitState::HalfOpen {
                    probe_started: true,
                };
                MayStart::Probe
            }
            CircuitState::HalfOpen {
                probe_started: true,
            } => MayStart::WaitForProbe,
        }
    }

    /// The probe went away without dying early (a planned exit): let another through.
    pub fn probe_gone(&mut self) {
        if let CircuitState::HalfOpen { .. } = self.state {
            self.state = CircuitState::HalfOpen {
                probe_started: false,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_the_threshold_lets_one_probe_through_and_closes_when_it_is_healthy() {
        let t0 = Instant::now();
        let mut c = Circuit::new(CircuitConfig {
            failures: 3,
            open_for: Duration::from_secs(10),
            open_max: Duration::from_secs(30),
        });
        assert!(!c.on_early_death(t0));
        assert!(!c.on_early_death(t0));
        assert_eq!(c.may_start(t0), MayStart::Yes);
        assert!(c.on_early_death(t0));
        assert_eq!(
            c.may_start(t0 + Duration::from_secs(9)),
            MayStart::NotUntil(t0 + Duration::from_secs(10))
        );
        let t1 = t0 + Duration::from_secs(10);
        assert_eq!(c.may_start(t1), MayStart::Probe);
        assert_eq!(c.may_start(t1), MayStart::WaitForProbe);
        // The probe dies early: open again, twice as long.
        assert!(c.on_early_death(t1));
        assert_eq!(
            c.may_start(t1 + Duration::from_secs(19)),
            MayStart::NotUntil(t1 + Duration::from_secs(20))
        );
        let t2 = t1 + Duration::from_secs(20);
        assert_eq!(c.may_start(t2), MayStart::Probe);
        assert!(c.on_healthy());
        assert_eq!(c.state(), CircuitState::Closed);
        assert_eq!(c.may_start(t2), MayStart::Yes);
        // Reset: it takes the full threshold again, and the first opening is short again.
        assert!(!c.on_early_death(t2));
        assert!(!c.on_early_death(t2));
        assert!(c.on_early_death(t2));
        assert_eq!(
            c.may_start(t2),
            MayStart::NotUntil(t2 + Duration::from_secs(10))
        );
    }

    #[test]
    fn the_opening_is_capped() {
        let t = Instant::now();
        let mut c = Circuit::new(CircuitConfig {
            failures: 1,
            open_for: Duration::from_secs(10),
            open_max: Duration::from_secs(15),
        });
        c.on_early_death(t);
        c.may_start(t + Duration::from_secs(10));
        c.on_early_death(t);
        assert_eq!(
            c.may_start(t),
            MayStart::NotUntil(t + Duration::from_secs(15))
        );
    }

    #[test]
    fn a_reload_closes_an_open_circuit_and_forgets_the_failures() {
        let now = Instant::now();
        let config = CircuitConfig {
            failures: 2,
            open_for: Duration::from_secs(30),
            open_max: Duration::from_secs(300),
        };
        let mut c = Circuit::new(config.clone());
        c.on_early_death(now);
        assert!(c.on_early_death(now));
        assert!(matches!(c.may_start(now), MayStart::NotUntil(_)));
        c.reset(config);
        assert_eq!(c.state(), CircuitState::Closed);
        assert_eq!(c.failures_in_a_row(), 0);
        assert_eq!(c.may_start(now), MayStart::Yes);
        // New code that dies early opens it again after `failures`, for the first pause length.
        assert!(!c.on_early_death(now));
        assert!(c.on_early_death(now));
        assert_eq!(
            c.may_start(now),
            MayStart::NotUntil(now + Duration::from_secs(30))
        );
    }
}
