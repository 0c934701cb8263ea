//! A sparse log-scale histogram: exact below 8 units, then 8 buckets per doubling, so a bucket is
//! at most 1/8 of its lower bound wide. Percentiles read from it are within 6.25% of the true
//! value; histograms of several minutes or nodes add bucket by bucket (docs/metrics.md).

use std::collections::BTreeMap;

/// Counts per bucket, with the exact count, sum and maximum.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Histogram {
    /// Bucket index (see [`index`]) to count; only buckets that were hit.
    buckets: BTreeMap<u16, u64>,
    /// Values recorded.
    n: u64,
    /// Their sum (f64: never overflows; the mean is what it is for).
    sum: f64,
    /// The largest value recorded.
    max: u64,
}

/// Buckets per doubling (a power of two).
const SUB: u64 = 8;
/// log2(SUB).
const SUB_BITS: u32 = 3;

/// The bucket of `v`: `v` itself below [`SUB`], then (doubling, position within it).
fn index(v: u64) -> u16 {
    if v < SUB {
        return v as u16;
    }
    let octave = 63 - v.leading_zeros(); // >= SUB_BITS
    let position = (v >> (octave - SUB_BITS)) & (SUB - 1);
    ((octave - SUB_BITS + 1) as u64 * SUB + position) as u16
}

/// The values a bucket holds: `[low, high)`.
fn bounds(i: u16) -> (u64, u64) {
    let i = u64::from(i);
    if i < SUB {
        return (i, i + 1);
    }
    let octave = (i / SUB) as u32 + SUB_BITS - 1;
    let position = i % SUB;
    let shift = octave - SUB_BITS;
    // In u128: the top doubling's upper bounds pass u64::MAX (they are capped to it).
    let bound = |p: u64| u64::try_from(u128::from(SUB + p) << shift).unwrap_or(u64::MAX);
    (bound(position), bound(position + 1))
}

impl Histogram {
    pub fn record(&mut self, v: u64) {
        *self.buckets.entry(index(v)).or_insert(0) += 1;
        self.n += 1;
        self.sum += v as f64;
        self.max = self.max.max(v);
    }

    /// The value below which a fraction `q` of the recorded values lie: the middle of the
    /// bucket where the count crosses `q`, never above the maximum. `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.n == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, count) in &self.buckets {
            seen += count;
            if seen >= rank {
                let (low, high) = bounds(*i);
                return Some((low + (high - 1 - low) / 2).min(self.max));
            }
        }
        Some(self.max)
    }

    /// The stored form: `{"n", "sum", "max", "p50", "p95", "buckets": [[upper, n], ...]}`, every
    /// value divided by `unit` (1000 turns microseconds into milliseconds). `upper` is the
    /// bucket's exclusive upper bound.
    pub fn to_json(&self, unit: f64) -> serde_json::Value {
        let scale = |v: u64| v as f64 / unit;
        serde_json::json!({
            "n": self.n,
            "sum": self.sum / unit,
            "max": scale(self.max),
            "p50": self.quantile(0.5).map(scale),
            "p95": self.quantile(0.95).map(scale),
            "buckets": self
                .buckets
                .iter()
                .map(|(i, n)| serde_json::json!([scale(bounds(*i).1), n]))
                .collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn buckets_tile_the_line_without_gaps() {
        let mut expected_low = 0;
        for i in 0..400u16 {
            let (low, high) = bounds(i);
            assert_eq!(low, expected_low, "bucket {i}");
            assert!(high > low);
            expected_low = high;
            assert_eq!(index(low), i);
            assert_eq!(index(high - 1), i);
        }
        assert_eq!(index(u64::MAX), index(u64::MAX - 1));
    }

    #[test]
    fn percentiles_of_a_known_spread() {
        let mut h = Histogram::default();
        for v in 1..=1000 {
            h.record(v * 1000);
        }
        let p50 = h.quantile(0.5).unwrap() as f64;
        let p95 = h.quantile(0.95).unwrap() as f64;
        assert!((p50 - 500_000.0).abs() / 500_000.0 < 0.0625, "{p50}");
        assert!((p95 - 950_000.0).abs() / 950_000.0 < 0.0625, "{p95}");
        assert_eq!(h.max, 1_000_000);
        assert_eq!(Histogram::default().quantile(0.5), None);
    }

    proptest! {
        #[test]
        fn a_bucket_is_at_most_an_eighth_of_its_values_wide(v in any::<u64>()) {
            let (low, high) = bounds(index(v));
            prop_assert!(low <= v && (v < high || high == u64::MAX));
            prop_assert!(high - low <= (low / 8).max(1) || high == u64::MAX);
        }
    }
}
