//! The tracer: an observer of the job lifecycle (`crate::lifecycle`) that makes the messaging
//! conventions' spans of each job this master runs, and hands them to the exporter.
//!
//! - `send {queue}` (producer): the dispatch, under the dispatching request's span when the
//!   payload carries a `traceparent`, from its `drover_sent_at`; made once, when the first
//!   attempt starts. Its id follows from the trace and the job (`ids::send_span`), so every
//!   attempt on any master names it without storing it.
//! - `process {queue}` (consumer): each attempt, from the worker's `started` to its end, under
//!   the `send` span; an error when the job failed or its worker was gone before it ended.
//! - `settle {queue}` (client): from the attempt's end to its settle written, under the
//!   `process` span; an error when the database refused it.
//!
//! A job whose payload carries no `traceparent` gets a trace of its own per attempt (no `send`
//! span: nobody dispatched it in a trace); one whose `traceparent` says "not sampled" gets none.

use std::collections::HashMap;

use drover_broker::JobId;
use serde::Deserialize;

use crate::lifecycle::{EndedBy, Event, JobRef, Observer};
use crate::rules::settle::Counted;

use super::ids::{send_span, IdSource, Parent, SpanId, TraceId};
use super::span::{Kind, Span, Value};

/// Endings waiting for their settle kept at most (a long database outage holds settles back):
/// past it, those endings get no `settle` span.
const MAX_SETTLING: usize = 65_536;

/// Where finished spans go (the exporter's queue; a list in unit tests).
pub trait SpanSink: Send {
    fn push(&mut self, span: Span);

    /// No span follows: a sink with a task of its own returns it (the master waits for it).
    fn close(self: Box<Self>) -> Option<tokio::task::JoinHandle<()>> {
        None
    }
}

/// Now, in Unix nanoseconds.
pub type Clock = Box<dyn Fn() -> u64 + Send>;

/// The system clock.
pub fn system_clock() -> Clock {
    Box::new(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
            .unwrap_or(0)
    })
}

/// The observer.
pub struct Tracer {
    ids: IdSource,
    clock: Clock,
    sink: Box<dyn SpanSink>,
    /// Jobs handed out in a trace and not ended yet, by id.
    jobs: HashMap<JobId, Traced>,
    /// Attempts ended whose settle is not written yet, by job id.
    settling: HashMap<JobId, Settling>,
}

/// A job's trace while this master holds it.
struct Traced {
    trace: TraceId,
    /// Its `send` span (the `process` spans' parent); none for a job dispatched outside a trace.
    send: Option<SpanId>,
    /// The `send` span still to export: the dispatching span and the moment of dispatch. Set at
    /// a first attempt's hand-out, exported when that attempt starts — a job given back unstarted
    /// (still its first attempt) is handed out again and must not export it twice.
    unsent: Option<(SpanId, u64)>,
    /// The running attempt's `process` span and its start, from the worker's `started`.
    process: Option<(SpanId, u64)>,
}

/// An ended attempt waiting for its settle.
struct Settling {
    trace: TraceId,
    /// Its `process` span.
    parent: SpanId,
    start: u64,
    queue: String,
    /// What the settle does: `ack`, `release` or `fail`.
    operation: &'static str,
}

/// The keys of a payload the tracer reads (every other key is skipped).
#[derive(Deserialize)]
struct TraceKeys {
    traceparent: Option<String>,
    drover_sent_at: Option<f64>,
}

impl Tracer {
    pub fn new(sink: Box<dyn SpanSink>, ids: IdSource, clock: Clock) -> Tracer {
        Tracer {
            ids,
            clock,
            sink,
            jobs: HashMap::new(),
            settling: HashMap::new(),
        }
    }

    fn dispatched(&mut self, job: &JobRef<'_>, payload: &str) {
        let keys = serde_json::from_str::<TraceKeys>(payload).ok();
        let parent = keys
            .as_ref()
            .and_then(|k| k.traceparent.as_deref())
            .and_then(Parent::from_traceparent);
        let traced = match parent {
            Some(parent) if !parent.sampled => return,
            Some(parent) => {
                let at = keys
                    .and_then(|k| k.drover_sent_at)
                    .filter(|s| s.is_finite() && *s > 0.0)
                    .map(|s| (s * 1e9) as u64)
                    .unwrap_or_else(|| (self.clock)());
                Traced {
                    trace: parent.trace,
                    send: Some(send_span(parent.trace, job.id)),
                    unsent: (job.attempt <= 1).then_some((parent.span, at)),
                    process: None,
                }
            }
            None => Traced {
                trace: self.ids.trace(),
                send: None,
                unsent: None,
                process: None,
            },
        };
        self.jobs.insert(job.id, traced);
    }

    /// The attempt's `process` span begins; a first attempt's `send` span goes out now.
    fn started(&mut self, job: &JobRef<'_>) {
        let now = (self.clock)();
        let id = self.ids.span();
        let Some(traced) = self.jobs.get_mut(&job.id) else {
            return;
        };
        traced.process = Some((id, now));
        if let (Some(send), Some((parent, at))) = (traced.send, traced.unsent.take()) {
            let trace = traced.trace;
            self.sink.push(Span {
                trace,
                id: send,
                parent: Some(parent),
                name: format!("send {}", job.queue),
                kind: Kind::Producer,
                start: at,
                end: at,
                attributes: attributes(job, "send"),
                error: None,
                links: Vec::new(),
            });
        }
    }

    fn ended(&mut self, job: &JobRef<'_>, by: EndedBy, counted: Counted) {
        let Some(traced) = self.jobs.remove(&job.id) else {
            return;
        };
        let Some((id, start)) = traced.process else {
            return;
        };
        let now = (self.clock)();
        let outcome = match (by, counted) {
            (EndedBy::WorkerGone, _) => "worker_gone",
            (_, Counted::Completed) => "done",
            (_, Counted::Failed) => "failed",
            _ => "released",
        };
        let error = match (by, counted) {
            (EndedBy::WorkerGone, _) => {
                Some("its worker exited before the job ended (killed, crashed or timed out)")
            }
            (_, Counted::Failed) => Some("the job failed"),
            _ => None,
        };
        let mut attrs = attributes(job, "process");
        attrs.push(("messaging.drover.outcome", Value::Str(outcome.into())));
        self.sink.push(Span {
            trace: traced.trace,
            id,
            parent: traced.send,
            name: format!("process {}", job.queue),
            kind: Kind::Consumer,
            start,
            end: now,
            attributes: attrs,
            error: error.map(str::to_string),
            links: Vec::new(),
        });
        if self.settling.len() < MAX_SETTLING {
            let operation = match counted {
                Counted::Completed => "ack",
                Counted::Failed => "fail",
                _ => "release",
            };
            self.settling.insert(
                job.id,
                Settling {
                    trace: traced.trace,
                    parent: id,
                    start: now,
                    queue: job.queue.to_string(),
                    operation,
                },
            );
        }
    }

    fn settled(&mut self, job: JobId, error: Option<&str>) {
        let Some(s) = self.settling.remove(&job) else {
            return;
        };
        let attributes = messaging(&s.queue, job, "settle", s.operation);
        let end = (self.clock)();
        self.sink.push(Span {
            trace: s.trace,
            id: self.ids.span(),
            parent: Some(s.parent),
            name: format!("settle {}", s.queue),
            kind: Kind::Client,
            start: s.start,
            end: end.max(s.start),
            attributes,
            error: error.map(str::to_string),
            links: Vec::new(),
        });
    }
}

/// The messaging conventions' attributes of a span of job `id` on `queue`.
fn messaging(
    queue: &str,
    id: JobId,
    kind: &'static str,
    name: &'static str,
) -> Vec<(&'static str, Value)> {
    vec![
        ("messaging.system", Value::Str("drover".into())),
        ("messaging.destination.name", Value::Str(queue.to_string())),
        ("messaging.operation.type", Value::Str(kind.into())),
        ("messaging.operation.name", Value::Str(name.into())),
        ("messaging.message.id", Value::Str(id.to_string())),
    ]
}

/// The attributes of a job's span for `operation`: the conventions' and drover's own.
fn attributes(job: &JobRef<'_>, operation: &'static str) -> Vec<(&'static str, Value)> {
    let mut attrs = messaging(job.queue, job.id, operation, operation);
    attrs.push((
        "messaging.drover.attempt",
        Value::Int(i64::from(job.attempt)),
    ));
    attrs.push((
        "messaging.drover.job.class",
        Value::Str(job.class.to_string()),
    ));
    attrs
}

impl Observer for Tracer {
    fn observe(&mut self, event: &Event<'_>) {
        match *event {
            Event::Dispatched { job, payload, .. } => self.dispatched(&job, payload),
            Event::Started { job, .. } => self.started(&job),
            Event::Ended {
                job, by, counted, ..
            } => self.ended(&job, by, counted),
            Event::SettlesWritten { jobs, .. } => {
                for &job in jobs {
                    self.settled(job, None);
                }
            }
            Event::SettleDropped { job, error } => self.settled(job, Some(error)),
            _ => {}
        }
    }

    fn close(self: Box<Self>) -> Option<tokio::task::JoinHandle<()>> {
        self.sink.close()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::lifecycle::Lifecycle;

    struct Collected(Arc<Mutex<Vec<Span>>>);

    impl SpanSink for Collected {
        fn push(&mut self, span: Span) {
            self.0.lock().unwrap().push(span);
        }
    }

    /// A lifecycle with only a tracer, whose clock is `now` (nanoseconds, set by the test).
    fn traced() -> (Lifecycle, Arc<Mutex<Vec<Span>>>, Arc<AtomicU64>) {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let now = Arc::new(AtomicU64::new(1_000));
        let clock = {
            let now = now.clone();
            Box::new(move || now.load(Ordering::Relaxed))
        };
        let mut lifecycle = Lifecycle::default();
        lifecycle.register(Box::new(Tracer::new(
            Box::new(Collected(spans.clone())),
            IdSource::seeded(1),
            clock,
        )));
        (lifecycle, spans, now)
    }

    const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    fn job(attempt: i32) -> JobRef<'static> {
        JobRef {
            id: 7,
            attempt,
            queue: "emails",
            class: "App\\Jobs\\Ship",
        }
    }

    /// One attempt of job 7: handed out, started at `at`, ended `by` so at `at + 10`, settled
    /// at `at + 15`.
    /// Job 1 handed to worker 1 and given back unstarted.
    fn given_back_unstarted(l: &mut Lifecycle, payload: &str) {
        l.emit(Event::Dispatched {
            job: job(1),
            worker: 1,
            pid: None,
            payload,
        });
        l.emit(Event::Ended {
            job: job(1),
            by: EndedBy::Returned,
            counted: Counted::ReturnedUnstarted,
            ran: None,
            pid: None,
        });
    }

    fn attempt(
        l: &mut Lifecycle,
        now: &AtomicU64,
        attempt: i32,
        payload: &str,
        by: EndedBy,
        counted: Counted,
        at: u64,
    ) {
        now.store(at, Ordering::Relaxed);
        l.emit(Event::Dispatched {
            job: job(attempt),
            worker: 1,
            pid: Some(9),
            payload,
        });
        l.emit(Event::Started {
            job: job(attempt),
            pid: Some(9),
            wait: std::time::Duration::ZERO,
        });
        now.store(at + 10, Ordering::Relaxed);
        l.emit(Event::Ended {
            job: job(attempt),
            by,
            counted,
            ran: None,
            pid: Some(9),
        });
        now.store(at + 15, Ordering::Relaxed);
        l.emit(Event::SettlesWritten {
            jobs: &[7],
            rode_claim: false,
            took: std::time::Duration::ZERO,
        });
    }

    #[test]
    fn a_traced_job_retried_once_is_one_send_two_process_and_two_settle_spans_in_its_trace() {
        let (mut l, spans, now) = traced();
        let payload = format!(r#"{{"job":"x","traceparent":"{PARENT}","drover_sent_at":0.5}}"#);
        attempt(
            &mut l,
            &now,
            1,
            &payload,
            EndedBy::Released,
            Counted::Released,
            100,
        );
        attempt(
            &mut l,
            &now,
            2,
            &payload,
            EndedBy::Done,
            Counted::Completed,
            200,
        );
        let spans = spans.lock().unwrap();
        let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "send emails",
                "process emails",
                "settle emails",
                "process emails",
                "settle emails"
            ]
        );
        let parent = Parent::from_traceparent(PARENT).unwrap();
        assert!(spans.iter().all(|s| s.trace == parent.trace), "one trace");
        let send = &spans[0];
        assert_eq!(send.parent, Some(parent.span), "under the request's span");
        assert_eq!(
            (send.kind, send.start, send.end),
            (Kind::Producer, 500_000_000, 500_000_000)
        );
        for (process, settle, start) in [(&spans[1], &spans[2], 100), (&spans[3], &spans[4], 200)] {
            assert_eq!(
                process.parent,
                Some(send.id),
                "each attempt under the send span"
            );
            assert_eq!(
                (process.kind, process.start, process.end),
                (Kind::Consumer, start, start + 10)
            );
            assert_eq!(settle.parent, Some(process.id));
            assert_eq!(
                (settle.kind, settle.start, settle.end),
                (Kind::Client, start + 10, start + 15)
            );
        }
        assert_ne!(spans[1].id, spans[3].id);
        let attempt_of = |s: &Span| {
            s.attributes
                .iter()
                .find(|(k, _)| *k == "messaging.drover.attempt")
                .map(|(_, v)| v.clone())
        };
        assert_eq!(attempt_of(&spans[1]), Some(Value::Int(1)));
        assert_eq!(attempt_of(&spans[3]), Some(Value::Int(2)));
        assert!(spans[1]
            .attributes
            .contains(&("messaging.destination.name", Value::Str("emails".into()))));
        assert!(spans[1]
            .attributes
            .contains(&("messaging.message.id", Value::Str("7".into()))));
        assert!(spans.iter().all(|s| s.error.is_none()));
    }

    #[test]
    fn a_job_whose_worker_died_ends_its_span_in_error_and_an_untraced_job_has_a_trace_of_its_own() {
        let (mut l, spans, now) = traced();
        attempt(
            &mut l,
            &now,
            1,
            r#"{"job":"x"}"#,
            EndedBy::WorkerGone,
            Counted::Released,
            100,
        );
        let spans = spans.lock().unwrap();
        let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            ["process emails", "settle emails"],
            "no send span outside a trace"
        );
        assert_eq!(spans[0].parent, None, "a root");
        assert!(spans[0].error.as_deref().unwrap().contains("worker exited"));
        assert!(spans[0]
            .attributes
            .contains(&("messaging.drover.outcome", Value::Str("worker_gone".into()))));
    }

    #[test]
    fn an_unsampled_parent_a_job_never_started_and_a_refused_settle() {
        let (mut l, spans, now) = traced();
        let unsampled = PARENT.replace("-01", "-00");
        let payload = format!(r#"{{"traceparent":"{unsampled}"}}"#);
        attempt(
            &mut l,
            &now,
            1,
            &payload,
            EndedBy::Done,
            Counted::Completed,
            100,
        );
        assert!(spans.lock().unwrap().is_empty(), "not sampled: no span");
        // Handed out, given back unstarted: no process span, no settle span.
        given_back_unstarted(&mut l, "{}");
        l.emit(Event::SettlesWritten {
            jobs: &[7],
            rode_claim: false,
            took: std::time::Duration::ZERO,
        });
        assert!(spans.lock().unwrap().is_empty());
        // A traced first attempt given back unstarted, handed out again and run: one send span.
        let traced = format!(r#"{{"traceparent":"{PARENT}"}}"#);
        given_back_unstarted(&mut l, &traced);
        attempt(
            &mut l,
            &now,
            1,
            &traced,
            EndedBy::Done,
            Counted::Completed,
            300,
        );
        let sends = spans
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.name == "send emails")
            .count();
        assert_eq!(sends, 1, "the send span once");
        spans.lock().unwrap().clear();
        // A settle the database refused.
        l.emit(Event::Dispatched {
            job: job(1),
            worker: 1,
            pid: None,
            payload: "{}",
        });
        l.emit(Event::Started {
            job: job(1),
            pid: None,
            wait: std::time::Duration::ZERO,
        });
        l.emit(Event::Ended {
            job: job(1),
            by: EndedBy::Done,
            counted: Counted::Completed,
            ran: None,
            pid: None,
        });
        l.emit(Event::SettleDropped {
            job: 7,
            error: "refused",
        });
        let spans = spans.lock().unwrap();
        assert_eq!(spans.len(), 2);
        assert_eq!(spans[1].error.as_deref(), Some("refused"));
    }
}
