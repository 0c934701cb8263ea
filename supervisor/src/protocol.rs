//! The worker protocol, version 3: newline-delimited JSON frames over the socketpair on fd 3, and
//! the zygote's frames: over its own fd 3, and the `attach` frame a forked worker opens its
//! connection with. The full description, with examples, is in `docs/protocol.md`.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// Sent by the worker in its `hello`; a worker speaking another version is stopped. Version 2
/// added `withdraw` (a worker of version 1 would ignore it and start the jobs it holds of a
/// paused queue); version 3 `queue_restart` (a worker of version 2 exits by itself on Laravel's
/// `queue:restart`, as under queue:work, and is replaced from the zygote it was forked from);
/// version 4 `within` on `done` (a master of version 3 would count a job completed inside its own
/// transaction as a stale ack, and take its missing row at a renewal for a lost lease).
pub const PROTOCOL_VERSION: u32 = 4;

/// The oldest version the master still speaks: workers of the previous release's package
/// (version 1, drover/laravel 0.1) during a rolling upgrade. They are sent no `withdraw` and hold
/// one job at a time (docs/upgrading.md, "Workers").
pub const MIN_PROTOCOL_VERSION: u32 = 1;

/// Sent by a zygote in its `zygote` frame. Version 2 added one-offs: a fork request may carry
/// `run`, and the process forked runs that one thing (a scheduled task) instead of a worker. A
/// zygote speaks 2 only when the master's environment says it may (`DROVER_ZYGOTE_ONE_OFFS=1`:
/// an older master refuses any version but 1) and it can run one-offs.
pub const ZYGOTE_PROTOCOL_VERSION: u32 = 2;

/// The oldest zygote version the master still speaks: a zygote of drover/laravel 0.2 or before (or one
/// without a one-off runner) forks workers only; one-offs are then started by exec.
pub const MIN_ZYGOTE_PROTOCOL_VERSION: u32 = 1;

/// What a worker may say.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(tag = "t", rename_all = "snake_case", deny_unknown_fields)]
pub enum FromWorker {
    /// First frame: protocol version, the worker's PID and how many jobs it may hold at once.
    /// `max_jobs`: how many jobs it runs before it exits by itself (Laravel's `max_jobs`; absent or
    /// 0: no limit), so the master gives it no more than that and no job is prefetched to a
    /// worker about to leave.
    Hello {
        v: u32,
        pid: u32,
        prefetch: u32,
        #[serde(default)]
        max_jobs: u64,
    },
    /// The worker began running this job (prefetched jobs never started go back uncharged).
    Started { job: i64, token: i64 },
    /// The job completed. `within`: its completion was written in the job's own transaction
    /// (`drover.complete_within`, which deleted the job's row), committed before this frame was
    /// sent. Protocol 4.
    Done {
        job: i64,
        token: i64,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        within: bool,
    },
    /// Run the job again later, after `delay_ms`.
    Release { job: i64, token: i64, delay_ms: u64 },
    /// The job failed for good. `logged`: the application already recorded the failure (Laravel's
    /// failer wrote `failed_jobs`), so the master only deletes the job; otherwise the master keeps
    /// it with its error in `drover.failed_jobs`.
    Fail {
        job: i64,
        token: i64,
        error: String,
        #[serde(default)]
        logged: bool,
    },
    /// A prefetched job the worker will not start (it was told to pause or stop): back to the
    /// queue at once, uncharged.
    Return { job: i64, token: i64 },
    /// Laravel's `queue:restart` was asked for (its cache key changed since this worker started:
    /// `at` is the key's timestamp, 0 when the key is gone): the master reloads — a new zygote
    /// from the release its application's path points to now, every worker replaced one by one —
    /// instead of the worker exiting and being forked again from the old code. Protocol 3.
    QueueRestart { at: i64 },
}

/// What the master may say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum ToWorker {
    /// A leased job to run (or hold in the worker's prefetch buffer).
    Job {
        job: i64,
        token: i64,
        queue: String,
        /// Attempts so far, this one included.
        attempts: i32,
        /// `null` = no limit.
        max_attempts: Option<i32>,
        payload: String,
        /// When present, do not run the job: fail it through the application's failure path with
        /// this reason (`timeout` or `max_attempts`). Set by the master for jobs whose worker it
        /// killed when Laravel's rules say they fail.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        fail: Option<String>,
        /// The worker's own deadline for this job, in milliseconds of `CLOCK_MONOTONIC` (the
        /// host's clock master and worker share): past it the worker must not start the job,
        /// and a worker still running it must end (the process exits) before it. It lies a
        /// margin before the end of the lease (docs/leases.md), and `lease` frames move it.
        lease_until_ms: u64,
        /// How the worker running this job's previous attempt died (`was killed by SIGSEGV`),
        /// when that is how it ended. Not a request to fail it: the worker applies the
        /// application's attempt rules as usual (Laravel's tries) and, if they fail the job,
        /// names this as the reason.
        #[serde(skip_serializing_if = "Option::is_none", default)]
        died: Option<String>,
    },
    /// The leases of every job this worker holds were renewed: each job's deadline moves to at
    /// least `until_ms` (`CLOCK_MONOTONIC` milliseconds, the margin already taken off).
    Lease {
        until_ms: u64,
    },
    /// Finish the running job, start no other, exit 0.
    Stop,
    /// Start no new job until `resume`.
    Pause,
    Resume,
    /// The queue was paused by name: give back (`return`) every prefetched job of it not
    /// started, and start none of them. The master sends no more of that queue's jobs until the
    /// pause ends; other queues' jobs go on.
    Withdraw {
        queue: String,
    },
}

impl ToWorker {
    /// The frame as it goes on the wire, newline included.
    pub fn encode(&self) -> Vec<u8> {
        encode(self)
    }
}

/// A frame the master sends, as it goes on the wire: one line of JSON, newline included.
pub(crate) fn encode<T: Serialize>(frame: &T) -> Vec<u8> {
    // The frames are enums of strings, integers and string maps: serialising cannot fail.
    let mut bytes = serde_json::to_vec(frame).expect("a frame always serialises");
    bytes.push(b'\n');
    bytes
}

/// One line a child sent (without its newline) as a frame of type `T`.
fn parse<T: DeserializeOwned>(line: &[u8]) -> Result<T, ProtocolError> {
    serde_json::from_slice(line).map_err(|e| ProtocolError::Malformed {
        // serde's message quotes the child's own text (an unknown `t` or field name), so it is
        // cut and made printable like the excerpt.
        reason: printable(&e.to_string(), 200),
        excerpt: excerpt(line),
    })
}

/// What a zygote may say on its fd 3.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case", deny_unknown_fields)]
pub enum FromZygote {
    /// It booted the application and forks on request from now on.
    Zygote { v: u32, pid: u32 },
    /// It forked `worker`, whose PID is `pid` (re-parented to the master as it is reported).
    Forked { worker: u64, pid: u32 },
    /// It could not fork `worker` (`fork(2)` failed, or the request was malformed).
    ForkFailed { worker: u64, error: String },
    /// It cannot serve at all (a missing extension, a failed warm-up) and exits next.
    Failed { error: String },
}

impl FromZygote {
    /// Parses one line (without its newline).
    pub fn parse(line: &[u8]) -> Result<FromZygote, ProtocolError> {
        parse(line)
    }
}

/// What the master tells a zygote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub enum ToZygote {
    /// Fork a worker: it connects to the master's Unix socket at `connect` and opens with an
    /// `attach` frame carrying `worker` and the one-time `token`; `env` is added to its
    /// environment.
    Fork {
        worker: u64,
        connect: String,
        token: String,
        env: BTreeMap<String, String>,
        /// A one-off instead of a worker (zygote version 2): what the application is to run,
        /// e.g. `{"kind":"schedule","task":KEY,"index":"3"}`. The process attaches as a worker
        /// does, writes what it has to say on its connection, and exits.
        #[serde(skip_serializing_if = "Option::is_none")]
        run: Option<BTreeMap<String, String>>,
    },
    /// Exit (the zygote's workers live on).
    Stop,
}

/// The first frame of a forked worker's connection to the master: who it is, and the token its
/// fork request carried.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case", deny_unknown_fields)]
pub enum Attach {
    Attach { worker: u64, token: String },
}

impl Attach {
    /// Parses one line (without its newline).
    pub fn parse(line: &[u8]) -> Result<Attach, ProtocolError> {
        parse(line)
    }
}

/// Why a worker's input was rejected. Each one stops the worker.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("malformed frame ({reason}): {excerpt}")]
    Malformed { reason: String, excerpt: String },
    #[error("frame longer than the {limit}-byte limit")]
    Oversized { limit: usize },
    #[error("speaks protocol version {got}, the master speaks {MIN_PROTOCOL_VERSION} to {PROTOCOL_VERSION}: the drover binary and the drover/laravel package are more than one release apart; install the same release of both (docs/upgrading.md), then restart the master")]
    WrongVersion { got: u32 },
    #[error("sent {frame} before hello")]
    NoHello { frame: &'static str },
    #[error("sent a second hello")]
    RepeatedHello,
    #[error("announced prefetch {got}; it must be between 1 and {max}")]
    BadPrefetch { got: u32, max: u32 },
    #[error("reported {frame} for job {job} token {token}, which it does not hold")]
    UnknownJob {
        frame: &'static str,
        job: i64,
        token: i64,
    },
    #[error("reported {frame} for job {job} before starting it")]
    NotStarted { frame: &'static str, job: i64 },
    #[error("returned job {job}, which it already started")]
    ReturnedStarted { job: i64 },
    #[error("started job {job} while job {running} is still running")]
    AlreadyRunning { job: i64, running: i64 },
    #[error("closed its end of the socket (fd 3) but kept running")]
    Closed,
    #[error("closed fd 3 in the middle of a frame (no newline after {bytes} bytes): {excerpt}")]
    PartialFrame { bytes: usize, excerpt: String },
}

impl ProtocolError {
    /// The bytes a worker left after its last newline when fd 3 closed.
    pub fn partial(rest: &[u8]) -> ProtocolError {
        ProtocolError::PartialFrame {
            bytes: rest.len(),
            excerpt: excerpt(rest),
        }
    }
}

impl FromWorker {
    /// Parses one line (without its newline).
    pub fn parse(line: &[u8]) -> Result<FromWorker, ProtocolError> {
        parse(line)
    }

    pub fn name(&self) -> &'static str {
        match self {
            FromWorker::Hello { .. } => "hello",
            FromWorker::Started { .. } => "started",
            FromWorker::Done { .. } => "done",
            FromWorker::Release { .. } => "release",
            FromWorker::Fail { .. } => "fail",
            FromWorker::Return { .. } => "return",
            FromWorker::QueueRestart { .. } => "queue_restart",
        }
    }
}

/// The first 80 characters of a bad frame, printable, for the log.
fn excerpt(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(&line[..line.len().min(80)]);
    let mut s: String = text
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if line.len() > 80 {
        s.push('…');
    }
    s
}

/// At most `max` characters of `text`, control characters replaced, `…` when cut.
fn printable(text: &str, max: usize) -> String {
    let mut s: String = text
        .chars()
        .take(max)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if text.chars().nth(max).is_some() {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_worker_frame() {
        assert_eq!(
            FromWorker::parse(br#"{"t":"hello","v":2,"pid":42,"prefetch":4}"#).unwrap(),
            FromWorker::Hello {
                v: 2,
                pid: 42,
                prefetch: 4,
                max_jobs: 0,
            }
        );
        assert_eq!(
            FromWorker::parse(br#"{"t":"hello","v":2,"pid":42,"prefetch":4,"max_jobs":1}"#)
                .unwrap(),
            FromWorker::Hello {
                v: 2,
                pid: 42,
                prefetch: 4,
                max_jobs: 1,
            }
        );
        assert_eq!(
            FromWorker::parse(br#"{"t":"release","job":7,"token":9,"delay_ms":1500}"#).unwrap(),
            FromWorker::Release {
                job: 7,
                token: 9,
                delay_ms: 1500
            }
        );
        assert_eq!(
            FromWorker::parse(br#"{"t":"fail","job":7,"token":9,"error":"boom"}"#).unwrap(),
            FromWorker::Fail {
                job: 7,
                token: 9,
                error: "boom".into(),
                logged: false,
            }
        );
        assert!(matches!(
            FromWorker::parse(br#"{"t":"fail","job":7,"token":9,"error":"boom","logged":true}"#),
            Ok(FromWorker::Fail { logged: true, .. })
        ));
    }

    #[test]
    fn rejects_garbage_unknown_frames_and_extra_fields() {
        for bad in [
            &b"\x00\xffgarbage"[..],
            br#"{"t":"explode"}"#,
            br#"{"t":"done","job":1}"#,
            br#"{"t":"done","job":1,"token":2,"x":3}"#,
            b"[]",
        ] {
            let err = FromWorker::parse(bad).unwrap_err();
            assert!(
                matches!(err, ProtocolError::Malformed { .. }),
                "{bad:?} gave {err:?}"
            );
        }
    }

    #[test]
    fn parses_zygote_frames_and_refuses_unknown_ones() {
        assert_eq!(
            FromZygote::parse(br#"{"t":"zygote","v":1,"pid":42}"#).unwrap(),
            FromZygote::Zygote { v: 1, pid: 42 }
        );
        assert_eq!(
            FromZygote::parse(br#"{"t":"forked","worker":7,"pid":43}"#).unwrap(),
            FromZygote::Forked { worker: 7, pid: 43 }
        );
        assert!(matches!(
            FromZygote::parse(br#"{"t":"failed","error":"no FFI"}"#),
            Ok(FromZygote::Failed { .. })
        ));
        for bad in [
            &br#"{"t":"hello","v":1,"pid":1,"prefetch":1}"#[..],
            br#"{"t":"forked","worker":-1,"pid":43}"#,
            br#"{"t":"zygote","v":1,"pid":42,"x":1}"#,
        ] {
            assert!(FromZygote::parse(bad).is_err(), "{bad:?}");
        }
        let fork = encode(&ToZygote::Fork {
            worker: 3,
            connect: "/run/x/fork.sock".into(),
            token: "ab".into(),
            env: BTreeMap::from([("DROVER_WORKER_ID".into(), "3".into())]),
            run: None,
        });
        assert_eq!(
            std::str::from_utf8(&fork).unwrap(),
            "{\"t\":\"fork\",\"worker\":3,\"connect\":\"/run/x/fork.sock\",\"token\":\"ab\",\"env\":{\"DROVER_WORKER_ID\":\"3\"}}\n"
        );
        let one_off = encode(&ToZygote::Fork {
            worker: 4,
            connect: "/run/x/fork.sock".into(),
            token: "cd".into(),
            env: BTreeMap::new(),
            run: Some(BTreeMap::from([("kind".into(), "schedule".into())])),
        });
        assert_eq!(
            std::str::from_utf8(&one_off).unwrap(),
            "{\"t\":\"fork\",\"worker\":4,\"connect\":\"/run/x/fork.sock\",\"token\":\"cd\",\"env\":{},\"run\":{\"kind\":\"schedule\"}}\n"
        );
        assert_eq!(
            Attach::parse(br#"{"t":"attach","worker":3,"token":"ab"}"#).unwrap(),
            Attach::Attach {
                worker: 3,
                token: "ab".into()
            }
        );
    }

    #[test]
    fn job_frames_are_one_line_of_json() {
        let frame = ToWorker::Job {
            job: 1,
            token: 2,
            queue: "default".into(),
            attempts: 1,
            max_attempts: None,
            payload: "{\"a\":\"line\\nbreak\"}".into(),
            fail: None,
            lease_until_ms: 123_456,
            died: None,
        }
        .encode();
        assert_eq!(frame.iter().filter(|&&b| b == b'\n').count(), 1);
        assert_eq!(*frame.last().unwrap(), b'\n');
    }
}
