//! How long to wait before restarting a worker. A worker that ran for at least `healthy_after`
//! is restarted after `min`; each consecutive early death doubles the wait, up to `max`.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Backoff {
    /// The first delay. Default 100 ms.
    pub min: Duration,
    /// The longest delay. Default 10 s.
    pub max: Duration,
    /// A worker that lived this long resets the count. Default 10 s.
    pub healthy_after: Duration,
    /// Early deaths in a row.
    failures: u32,
}

impl Backoff {
    pub fn new(min: Duration, max: Duration, healthy_after: Duration) -> Self {
        Backoff {
            min,
            max,
            healthy_after,
            failures: 0,
        }
    }

    /// Records an exit after `lived` and returns the delay before the next start.
    pub fn on_exit(&mut self, lived: Duration) -> Duration {
        if lived >= self.healthy_after {
            self.failures = 0;
        } else {
            self.failures = self.failures.saturating_add(1);
        }
        let exp = self.failures.saturating_sub(1).min(20);
        (self.min * 2u32.pow(exp)).min(self.max)
    }

    /// A planned exit: resets the count; the next start comes after `min`.
    pub fn on_planned_exit(&mut self) -> Duration {
        self.failures = 0;
        self.min
    }

    pub fn failures(&self) -> u32 {
        self.failures
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new(
            Duration::from_millis(100),
            Duration::from_secs(10),
            Duration::from_secs(10),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_for_early_deaths_and_resets_after_a_healthy_run() {
        let mut b = Backoff::default();
        let young = Duration::from_millis(5);
        assert_eq!(b.on_exit(young), Duration::from_millis(100));
        assert_eq!(b.on_exit(young), Duration::from_millis(200));
        assert_eq!(b.on_exit(young), Duration::from_millis(400));
        for _ in 0..20 {
            b.on_exit(young);
        }
        assert_eq!(b.on_exit(young), Duration::from_secs(10));
        assert_eq!(
            b.on_exit(Duration::from_secs(60)),
            Duration::from_millis(100)
        );
        assert_eq!(b.failures(), 0);
    }
}
