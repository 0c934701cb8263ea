//! How long to wait before restarting a worker: `min` after a planned exit; after the n-th boot
//! failure in a row (counted by the pool's circuit, see [`crate::circuit`]) `min` doubled n−1
//! times, up to `max`; after the n-th death in service in a row, `min` doubled n−1 times up to
//! [`Backoff::in_service_max`] — a serving worker is replaced at once.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Backoff {
    /// The first delay. Default 100 ms.
    pub min: Duration,
    /// The longest delay. Default 10 s.
    pub max: Duration,
    /// How long a worker must live after its hello to count as healthy: its death then resets
    /// the in-service backoff. Default 10 s.
    pub healthy_after: Duration,
    /// The longest wait before replacing a worker that died in service. Default 200 ms: a pool
    /// whose workers are killed from outside (the OOM killer, an operator) stays at strength —
    /// measured with a random worker SIGKILLed every 200 ms, a cap of 500 ms left three of four
    /// places empty most of the time — while a worker that dies at every job still costs a
    /// boot per 200 ms per place at most, and its jobs use up their attempts and fail.
    pub in_service_max: Duration,
}

impl Backoff {
    pub fn new(min: Duration, max: Duration, healthy_after: Duration) -> Self {
        Backoff {
            min,
            max,
            healthy_after,
            in_service_max: Duration::from_millis(200),
        }
    }

    /// The wait before replacing a worker after `in_a_row` deaths in service in a row.
    pub fn in_service_delay(&self, in_a_row: u32) -> Duration {
        self.delay(in_a_row).min(self.in_service_max)
    }

    /// The wait before the next start after `in_a_row` early deaths in a row (0: none).
    pub fn delay(&self, in_a_row: u32) -> Duration {
        let exp = in_a_row.saturating_sub(1).min(20);
        (self.min * 2u32.pow(exp)).min(self.max)
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
    fn doubles_for_each_early_death_in_a_row_up_to_the_maximum() {
        let b = Backoff::default();
        assert_eq!(b.delay(0), Duration::from_millis(100));
        assert_eq!(b.delay(1), Duration::from_millis(100));
        assert_eq!(b.delay(2), Duration::from_millis(200));
        assert_eq!(b.delay(3), Duration::from_millis(400));
        assert_eq!(b.delay(8), Duration::from_secs(10));
        assert_eq!(b.delay(1000), Duration::from_secs(10));
    }

    #[test]
    fn a_death_in_service_is_replaced_within_a_second() {
        let b = Backoff::default();
        assert_eq!(b.in_service_delay(1), Duration::from_millis(100));
        assert_eq!(b.in_service_delay(2), Duration::from_millis(200));
        assert_eq!(b.in_service_delay(3), Duration::from_millis(200));
        assert_eq!(b.in_service_delay(u32::MAX), Duration::from_millis(200));
    }
}
