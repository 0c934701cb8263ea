//! The recorder: the task that takes the loop's job observations, feeds the Prometheus series
//! and the per-minute book, writes the book's changed minutes to `drover.metrics` every
//! [`RecorderConfig::flush_every`] (and once more at exit), and trims rows past retention.
//! A write that fails is retried at the next flush; rows are written whole, so a retry is
//! harmless.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::mpsc;

use crate::lifecycle::{EndedBy, Event, JobRef, Observer};
use crate::metrics::classes::ClassGate;
use crate::metrics::usage::{Probe, UsageMark};
use crate::metrics::{CompletedJob, Exposition, MinuteBook, Observation, Outcome};
use crate::rules::settle::Counted;
use crate::store::Records;
use drover_broker::{HistoryRow, JobId};

use super::history_writer::HistoryWriter;

/// How the recorder works.
#[derive(Debug, Clone)]
pub struct RecorderConfig {
    /// Write per-minute rows to `drover.metrics` (`record_metrics`). Default true. Prometheus
    /// series are kept either way.
    pub record: bool,
    /// How often changed minutes are written. Default 10 s.
    pub flush_every: Duration,
    /// How long rows are kept (`metrics_trim`, minutes). Default a day; zero keeps them.
    pub keep: Duration,
    /// How long completed jobs are kept in `drover.recent_jobs` (`history_minutes`); zero keeps
    /// no history. Default zero.
    pub history: Duration,
}

impl RecorderConfig {
    /// Completed jobs are recorded (their payloads kept while they run).
    pub fn keeps_history(&self) -> bool {
        !self.history.is_zero()
    }
}

impl Default for RecorderConfig {
    fn default() -> Self {
        RecorderConfig {
            record: true,
            flush_every: Duration::from_secs(10),
            keep: Duration::from_secs(24 * 3600),
            history: Duration::ZERO,
        }
    }
}

/// How often retention runs (the history may be kept only an hour), and the most time one pass
/// spends deleting.
const TRIM_EVERY: Duration = Duration::from_secs(300);
const TRIM_BUDGET: Duration = Duration::from_secs(10);

fn minute_of(t: SystemTime) -> i64 {
    let secs = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    i64::try_from(secs / 60).unwrap_or(i64::MAX)
}

/// The most the writes at exit may take (the metrics' last minutes, then the history's queue):
/// a slow database must not outlast the service manager's stop timeout.
const EXIT_BUDGET: Duration = Duration::from_secs(10);

/// The loop's side of metering, an observer of the job lifecycle (`crate::lifecycle`): it
/// keeps what it needs of each job by its id — the worker's usage mark and the wait at the
/// start, the payload while the history is on — and hands the recorder task one observation per
/// start and per ending: the Prometheus series, the per-minute book and the history all come
/// from those.
pub(super) struct Metering {
    /// Each worker's open `/proc` files, by PID, for per-job CPU and peak memory; dropped when
    /// the worker is gone.
    probes: HashMap<u32, Probe>,
    /// Jobs started and not yet ended: their worker's usage mark and their wait.
    started: HashMap<JobId, Start>,
    /// Payloads of the jobs handed out, by id, kept only while the history is on (`None` off).
    payloads: Option<HashMap<JobId, String>>,
    /// The database's clock, for a completed job's time in the history.
    store: Arc<dyn Records>,
    /// Job starts and ends, on their way to the recorder.
    tx: mpsc::UnboundedSender<Observation>,
    /// The recorder task, awaited at exit so the last minutes are written.
    task: tokio::task::JoinHandle<()>,
}

/// What a job's start left for its end.
struct Start {
    /// The worker's CPU counter (and reset memory peak) at the start.
    usage: Option<UsageMark>,
    /// From availability to the worker's `started`.
    wait: Duration,
}

impl Metering {
    pub(super) fn start(
        store: Arc<dyn Records>,
        exposition: Option<Arc<Exposition>>,
        config: RecorderConfig,
    ) -> Metering {
        let (tx, rx) = mpsc::unbounded_channel();
        Metering {
            probes: HashMap::new(),
            started: HashMap::new(),
            payloads: config.keeps_history().then(HashMap::new),
            store: store.clone(),
            tx,
            task: tokio::spawn(record(store, rx, exposition, config)),
        }
    }

    /// The probe of worker `pid`, opened at its first job.
    fn probe(&mut self, pid: u32) -> Option<&Probe> {
        match self.probes.entry(pid) {
            std::collections::hash_map::Entry::Occupied(e) => Some(e.into_mut()),
            std::collections::hash_map::Entry::Vacant(v) => Some(v.insert(Probe::open(pid)?)),
        }
    }

    /// The observation of an attempt that ended, reading what its worker used since the start
    /// while the worker is there to be read. None for a job that never started or never reached
    /// a worker (not an attempt the metrics count).
    fn ended(
        &mut self,
        job: &JobRef<'_>,
        by: EndedBy,
        counted: Counted,
        ran: Option<Duration>,
        pid: Option<u32>,
    ) -> Option<Observation> {
        let start = self.started.remove(&job.id);
        let payload = self.payloads.as_mut().and_then(|p| p.remove(&job.id));
        let outcome = match counted {
            Counted::Completed => Outcome::Completed,
            Counted::Released => Outcome::Released,
            Counted::Failed => Outcome::Failed,
            Counted::ReturnedUnstarted => return None,
        };
        if by == EndedBy::NotHandedOut {
            return None;
        }
        let usage = pid
            .and_then(|pid| self.probes.get(&pid))
            .zip(start.as_ref().and_then(|s| s.usage))
            .and_then(|(probe, mark)| probe.measure(mark));
        // The history keeps the completed job (its payload is kept only then).
        let completed = match (counted, payload, pid) {
            (Counted::Completed, Some(payload), Some(worker_pid)) => Some(Box::new(CompletedJob {
                id: job.id,
                attempt: job.attempt,
                payload,
                worker_pid,
                wait: start.as_ref().map(|s| s.wait),
                // Read only for the history: `done` is the hot path.
                finished_at: self.store.database_time(),
            })),
            _ => None,
        };
        Some(Observation::Finished {
            queue: job.queue.to_string(),
            class: job.class.to_string(),
            outcome,
            runtime: ran.unwrap_or_default(),
            usage,
            completed,
        })
    }
}

impl Observer for Metering {
    fn observe(&mut self, event: &Event<'_>) {
        let observation = match *event {
            Event::Dispatched { job, payload, .. } => {
                if let Some(payloads) = &mut self.payloads {
                    payloads.insert(job.id, payload.to_string());
                }
                return;
            }
            Event::Started { job, pid, wait } => {
                let usage = pid.and_then(|pid| self.probe(pid)).and_then(Probe::mark);
                self.started.insert(job.id, Start { usage, wait });
                Observation::Started {
                    queue: job.queue.to_string(),
                    class: job.class.to_string(),
                    wait,
                }
            }
            Event::Ended {
                job,
                by,
                counted,
                ran,
                pid,
            } => match self.ended(&job, by, counted, ran, pid) {
                Some(o) => o,
                None => return,
            },
            // Its PID may be reused: its /proc files must not be read again.
            Event::WorkerGone { pid } => {
                self.probes.remove(&pid);
                return;
            }
            _ => return,
        };
        let _ = self.tx.send(observation);
    }

    /// Ends the recorder's input: it writes what is left, then its task ends.
    fn close(self: Box<Self>) -> Option<tokio::task::JoinHandle<()>> {
        Some(self.task)
    }
}

/// Runs until every sender of `observations` is gone, then writes what is left within
/// [`EXIT_BUDGET`].
pub(super) async fn record(
    store: Arc<dyn Records>,
    mut observations: mpsc::UnboundedReceiver<Observation>,
    exposition: Option<Arc<Exposition>>,
    config: RecorderConfig,
) {
    let mut book = MinuteBook::default();
    let mut classes = ClassGate::default();
    // Completed jobs waiting to be written to the history.
    let mut history = HistoryWriter::default();
    let mut flush = tokio::time::interval(config.flush_every);
    flush.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut trim = tokio::time::interval(TRIM_EVERY);
    trim.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing = false;
    loop {
        tokio::select! {
            observation = observations.recv() => match observation {
                Some(o) => {
                    let mut o = admit(&mut classes, o);
                    if let Some(exposition) = &exposition {
                        exposition.observe(&o);
                    }
                    if let Some(row) = history_row(&mut o) {
                        history.push(row, &store);
                    }
                    if config.record {
                        book.record(minute_of(store.database_time()), o);
                    }
                }
                None => break,
            },
            result = history.written() => history.settle(result, &store),
            _ = flush.tick() => {
                if config.record {
                    write(&*store, &mut book, &mut failing).await;
                }
                history.start(&store);
            }
            // Also with recording off: rows written before it was turned off still age out.
            _ = trim.tick() => {
                let store = store.clone();
                let keep = config.keep;
                // With the history off, rows written while it was on go at the metrics' age.
                let history_keep = if config.history.is_zero() { keep } else { config.history };
                tokio::spawn(async move {
                    if !keep.is_zero() {
                        match store.trim_metrics(keep, TRIM_BUDGET).await {
                            Ok(0) => {}
                            Ok(deleted) => tracing::info!(deleted, "retention: deleted metric rows older than {} minutes from drover.metrics", keep.as_secs() / 60),
                            Err(e) => tracing::warn!(database = %store.address(), "retention of drover.metrics: {e}"),
                        }
                    }
                    if !history_keep.is_zero() {
                        if let Err(e) = store.trim_history(history_keep, TRIM_BUDGET).await {
                            tracing::warn!(database = %store.address(), "retention of drover.recent_jobs: {e}");
                        }
                    }
                });
            }
        }
    }
    let last = async {
        if config.record {
            write(&*store, &mut book, &mut failing).await;
        }
        history.finish(&store).await;
    };
    if tokio::time::timeout(EXIT_BUDGET, last).await.is_err() {
        tracing::warn!("the last metrics and completed jobs were not all written within {EXIT_BUDGET:?}; the rest are dropped");
    }
}

/// The history row of a completed job (taking it out of the observation), placed by the time
/// the master saw it complete (the database's clock).
fn history_row(observation: &mut Observation) -> Option<HistoryRow> {
    let Observation::Finished {
        queue,
        class,
        runtime,
        usage,
        completed,
        ..
    } = observation
    else {
        return None;
    };
    let job = completed.take()?;
    Some(HistoryRow {
        id: job.id,
        attempt: job.attempt,
        queue: queue.clone(),
        class: class.clone(),
        payload: job.payload,
        worker_pid: i32::try_from(job.worker_pid).unwrap_or(i32::MAX),
        started_at: job
            .finished_at
            .checked_sub(*runtime)
            .unwrap_or(job.finished_at),
        finished_at: job.finished_at,
        runtime: *runtime,
        wait: job.wait,
        cpu: usage.map(|u| u.cpu),
        memory_kib: usage.and_then(|u| u.peak_kib),
    })
}

/// The observation with its class admitted (or counted as `(other)`).
fn admit(classes: &mut ClassGate, observation: Observation) -> Observation {
    match observation {
        Observation::Started { queue, class, wait } => Observation::Started {
            queue,
            class: classes.admit(class),
            wait,
        },
        Observation::Finished {
            queue,
            class,
            outcome,
            runtime,
            usage,
            completed,
        } => Observation::Finished {
            queue,
            class: classes.admit(class),
            outcome,
            runtime,
            usage,
            completed,
        },
    }
}

/// Rows per statement: after an outage the book may hold an hour of rows; written in pieces,
/// no statement runs long.
const ROWS_PER_WRITE: usize = 200;

/// Writes the changed minutes; on failure keeps them for the next try (logged once per outage).
async fn write(store: &dyn Records, book: &mut MinuteBook, failing: &mut bool) {
    let rows = book.changed();
    for (i, chunk) in rows.chunks(ROWS_PER_WRITE).enumerate() {
        match store.record_metrics(chunk).await {
            Ok(()) => {
                if std::mem::take(failing) {
                    tracing::info!("metrics are written again");
                }
            }
            Err(e) => {
                // This piece and every later one wait for the next flush.
                book.unwritten(&rows[i * ROWS_PER_WRITE..]);
                if !std::mem::replace(failing, true) {
                    tracing::warn!(database = %store.address(), "cannot write metrics ({e}); keeping up to {} minutes of them until the database answers", crate::metrics::minutes::MAX_OPEN_MINUTES);
                }
                break;
            }
        }
    }
    let dropped = book.forget_before(minute_of(store.database_time()));
    if dropped > 0 {
        tracing::warn!(
            dropped,
            "dropped metric rows older than {} minutes that could not be written",
            crate::metrics::minutes::MAX_OPEN_MINUTES
        );
    }
}
