//! How long to wait before restarting a worker: `min` after a planned exit or the crash of a
//! healthy worker; after the n-th early death in a row (counted by the pool's circuit, see
//! [`crate::circuit`]) `min` doubled n−1 times, up to `max`.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Backoff {
    /// The first delay. Default 100 ms.
    pub min: Duration,
    /// The longest delay. Default 10 s.
    pub max: Duration,
    /// How long a worker must live after its hello to count as healthy (its death is then not an
    /// early one, and it resets the count). Default 10 s.
    pub healthy_after: Duration,
}

impl Backoff {
    pub fn new(min: Duration, max: Duration, healthy_after: Duration) -> Self {
        Backoff {
            min,
            max,
            healthy_after,
        }
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
}
