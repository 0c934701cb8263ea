//! What a worker's socket may hold while the worker cannot read it.
//!
//! A worker reads its socket between jobs only. Frames the master sends it while it runs a job wait
//! in the socket, whose buffer Linux sizes at 208 KiB by default (`net.core.wmem_default`) and
//! charges per write, not per byte: a write of 40 bytes costs 768, one of 300 bytes 1,280, one
//! of 1 KiB 2,304, one of 40 KiB 42,496 (measured here with `SIOCOUTQ`, kernel 6.18: a small
//! write costs its length and about 320 bytes rounded up to a power of two, plus 256; a large one
//! its pages and a little more; [`charge`]). Once the buffer is full, the master's next frame to the
//! worker — the `withdraw` of a queue paused by name, a `stop` — waits for the running job to end,
//! and `queue:pause` with it (docs/decisions/0006-a-pause-holds-when-it-returns.md). So:
//!
//! - a worker that holds a job is given more only while the job frames it holds unstarted cost at
//!   most [`BUDGET`], a third of the buffer ([`takes`], [`how_many`]); a worker that holds nothing
//!   takes a job of any size, since it is reading its socket;
//! - a `lease` frame (which only moves the deadlines of prefetched jobs) goes to a worker holding
//!   unstarted jobs, and no other goes to it until it has spoken again (`Assignments`): a worker
//!   running a job for an hour would otherwise be sent 360 of them, 270 KiB. A worker busy for
//!   longer than a lease then finds its prefetched jobs past the deadline it knows, and gives them
//!   back unstarted (uncharged; they were renewed all along).
//!
//! Pure: the charge is computed, not read from the socket.

use drover_broker::LeasedJob;

/// What the job frames a busy worker holds unstarted may cost in its socket: a third of Linux's
/// default buffer, so a control frame and a `lease` frame always fit beside them.
pub const BUDGET: usize = 64 * 1024;

/// What a write of `len` bytes costs in a Unix socket's buffer: its length and the kernel's
/// overhead, rounded up as the kernel allocates (a small write in one buffer of a power of two, a
/// large one in pages). Exact for small writes, a little over for large ones, never under what
/// was measured.
pub fn charge(len: usize) -> usize {
    const PAGE: usize = 4096;
    let small = len.saturating_add(320);
    if small <= PAGE {
        return small.next_power_of_two() + 256;
    }
    let pages = len.div_ceil(PAGE).saturating_mul(PAGE);
    let chunks = 1 + len / (64 * 1024);
    pages.saturating_add(chunks.saturating_mul(2048))
}

/// About how many bytes `job`'s frame takes on the wire: its payload as a JSON string (quotes
/// and backslashes escaped) and the other fields. Control characters, escaped to six bytes each,
/// are rare enough in payloads to leave out.
pub fn frame_len(job: &LeasedJob) -> usize {
    let escaped = |s: &str| {
        s.len()
            .saturating_add(s.bytes().filter(|b| *b == b'"' || *b == b'\\').count())
    };
    escaped(&job.payload)
        .saturating_add(escaped(&job.queue))
        .saturating_add(job.failure.as_deref().map_or(0, escaped))
        .saturating_add(256)
}

/// Whether a job frame costing `charge` may go to a worker now, `unstarted` being what the frames
/// it holds unstarted cost: it holds nothing (it reads its socket at once), or stays within the
/// budget.
pub fn takes(holds_nothing: bool, unstarted: usize, charge: usize) -> bool {
    holds_nothing || unstarted.saturating_add(charge) <= BUDGET
}

/// How many more jobs, each costing `next` (0: not known), a worker may be given now: at most
/// `room` (its credit by count), and no more than fit its budget. With `next` unknown, its room
/// while it is under the budget, none once it is at it.
pub fn how_many(holds_nothing: bool, unstarted: usize, room: usize, next: usize) -> usize {
    if next == 0 {
        return if unstarted >= BUDGET { 0 } else { room };
    }
    let mut given = 0;
    let mut used = unstarted;
    let mut empty = holds_nothing;
    while given < room && takes(empty, used, next) {
        given += 1;
        used = used.saturating_add(next);
        empty = false;
    }
    given
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_costs_what_linux_charges_for_it() {
        // Measured with SIOCOUTQ on a Unix stream socket (kernel 6.18): one write of each length.
        for (len, measured) in [
            (40, 768),
            (300, 1280),
            (1024, 2304),
            (1500, 2304),
            (2048, 4352),
            (3000, 4352),
        ] {
            assert_eq!(charge(len), measured, "{len} bytes");
        }
        for (len, measured) in [
            (3800, 4864),
            (4096, 4864),
            (6000, 8448),
            (16384, 17152),
            (40960, 42496),
            (65536, 67072),
            (100_000, 103_168),
        ] {
            let c = charge(len);
            assert!(c >= measured && c <= measured + 4096, "{len} bytes: {c}");
        }
        assert_eq!(charge(usize::MAX), usize::MAX, "never wraps");
    }

    #[test]
    fn a_worker_holding_nothing_takes_any_job_and_a_busy_one_only_within_the_budget() {
        assert!(takes(true, 0, 10 * BUDGET));
        assert!(takes(false, BUDGET - 2048, 2048));
        assert!(!takes(false, BUDGET - 2048, 2049));
    }

    #[test]
    fn how_many_jobs_of_a_known_size_a_worker_may_be_given() {
        let big = charge(70 * 1024); // over the budget alone
        assert_eq!(how_many(true, 0, 8, big), 1, "an idle worker takes one");
        assert_eq!(how_many(false, 0, 8, big), 0, "a busy one none");
        let small = charge(1024);
        assert_eq!(how_many(false, 0, 8, small), 8, "room is the limit");
        assert_eq!(how_many(false, 0, 100, small), BUDGET / small);
        assert_eq!(
            how_many(false, BUDGET, 8, 0),
            0,
            "unknown size, budget spent"
        );
        assert_eq!(
            how_many(false, BUDGET - 1, 8, 0),
            8,
            "unknown size, under it"
        );
        assert_eq!(how_many(true, 0, 0, small), 0, "no room, nothing");
    }

    #[test]
    fn a_frame_counts_the_escapes_of_its_payload() {
        let job = LeasedJob {
            id: 1,
            queue: "default".into(),
            payload: r#"{"a":"b\c"}"#.into(),
            attempts: 1,
            max_attempts: None,
            token: 1,
            failure: None,
            waited: std::time::Duration::ZERO,
            grouped: false,
        };
        assert_eq!(frame_len(&job), 11 + 5 + 7 + 256);
    }
}
