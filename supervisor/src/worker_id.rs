//! [`WorkerId`]: how the supervisor and the master name a worker — in events, frames' replies,
//! fork requests and the rendezvous's tokens — across all pools and for the master's whole life.

/// A master-assigned worker identity; unlike a PID it is never reused, across all pools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WorkerId(pub u64);

impl WorkerId {
    /// The next unused id of this process.
    pub fn next() -> WorkerId {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        WorkerId(NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
    }
}

impl std::fmt::Display for WorkerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "worker {}", self.0)
    }
}
