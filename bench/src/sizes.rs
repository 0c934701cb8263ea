//! The sizes of a run: how many jobs each shape gets, and the workers, prefetch, groups and
//! bursts it runs with; `--quick` shrinks them.

use serde::{Deserialize, Serialize};

/// Sizes; `--quick` shrinks them.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Sizes {
    pub seed_jobs: i64,
    pub overhead_jobs: i64,
    pub latency_jobs: i64,
    pub latency_rate: u32,
    pub scale_jobs: i64,
    pub idle_workers: usize,
    /// drover's prefetch per worker in shapes 1, 2 and 4 (shape 3 uses 1).
    #[serde(default = "default_prefetch")]
    pub prefetch: usize,
    /// Shape 6: ordered groups.
    #[serde(default)]
    pub groups: GroupSizes,
    /// Shape 7: bursts of [`BURST_JOBS`] jobs, [`BURST_EVERY`] apart.
    #[serde(default = "default_bursts")]
    pub bursts: i64,
}

fn default_bursts() -> i64 {
    10
}

/// Shape 7: jobs per burst, dispatched one at a time.
pub const BURST_JOBS: i64 = 20;
/// Shape 7: from one burst's start to the next, seconds.
pub const BURST_EVERY: f64 = 1.5;

fn default_prefetch() -> usize {
    4
}

impl Sizes {
    pub fn full() -> Sizes {
        Sizes {
            seed_jobs: 2000,
            overhead_jobs: 20_000,
            latency_jobs: 500,
            latency_rate: 50,
            scale_jobs: 1_000_000,
            idle_workers: 64,
            prefetch: 8,
            groups: GroupSizes::full(),
            bursts: 10,
        }
    }
    pub fn quick() -> Sizes {
        Sizes {
            seed_jobs: 400,
            overhead_jobs: 2000,
            latency_jobs: 100,
            latency_rate: 50,
            scale_jobs: 20_000,
            idle_workers: 16,
            prefetch: 8,
            groups: GroupSizes::quick(),
            bursts: 4,
        }
    }
}

/// Sizes of shape 6.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct GroupSizes {
    /// Distinct groups of the cardinality run.
    pub groups_total: u32,
    /// Jobs each group gets while in the window.
    pub jobs_per_group: u32,
    /// Groups in the producer's window: a group's jobs are S = window / (jobs − 1) steps apart
    /// (at least 1). The default, jobs − 1, enqueues them back to back.
    pub window: u32,
    /// Target enqueue rate (jobs/s); 0: as fast as the producer can.
    pub rate: f64,
    /// Jobs of the hot group.
    pub hot_jobs: u32,
    /// Small groups beside it, and jobs in each.
    pub small_groups: u32,
    pub small_jobs: u32,
    /// Run the ungrouped control (the same producer and job count, no group).
    pub control: bool,
    /// Producer connections of the cardinality runs (groups split among them by number).
    #[serde(default = "one")]
    pub producers: usize,
}

fn one() -> usize {
    1
}

impl Default for GroupSizes {
    fn default() -> GroupSizes {
        GroupSizes::full()
    }
}

/// Steps between a group's consecutive jobs in [`crate::groups::Plan::window`]:
/// window / (jobs − 1), at least 1.
pub fn stride(jobs_per_group: u32, window: u32) -> u64 {
    let j = jobs_per_group.max(1) as u64;
    if j > 1 {
        (window as u64 / (j - 1)).max(1)
    } else {
        1
    }
}

impl GroupSizes {
    /// The window that puts a group's jobs back to back (S = 1), the default.
    pub fn back_to_back(jobs_per_group: u32) -> u32 {
        jobs_per_group.saturating_sub(1).max(1)
    }
    pub fn stride(&self) -> u64 {
        stride(self.jobs_per_group, self.window)
    }
    pub fn full() -> GroupSizes {
        let jobs_per_group = 3;
        GroupSizes {
            groups_total: 1_000_000,
            jobs_per_group,
            window: GroupSizes::back_to_back(jobs_per_group),
            rate: 0.0,
            hot_jobs: 10_000,
            small_groups: 1000,
            small_jobs: 10,
            control: true,
            producers: 2,
        }
    }
    pub fn quick() -> GroupSizes {
        GroupSizes {
            groups_total: 5000,
            hot_jobs: 2000,
            small_groups: 200,
            ..GroupSizes::full()
        }
    }
}
