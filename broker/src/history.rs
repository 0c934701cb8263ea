//! Completed-job history (`drover.recent_jobs`), when it is on: rows written in batches by the
//! master's recorder, on the side connection (`crate::metrics`), and trimmed by age.

use std::time::{Duration, SystemTime};

use crate::{Broker, BrokerError};

/// One completed job as its master saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryRow {
    pub id: i64,
    /// The attempt that completed it.
    pub attempt: i32,
    pub queue: String,
    pub class: String,
    pub payload: String,
    pub worker_pid: i32,
    /// By the database's clock, as the master places it.
    pub started_at: SystemTime,
    pub finished_at: SystemTime,
    pub runtime: Duration,
    pub wait: Option<Duration>,
    pub cpu: Option<Duration>,
    pub memory_kib: Option<u64>,
}

fn epoch_secs(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// History rows deleted per statement by [`Broker::trim_history`].
pub const TRIM_HISTORY_BATCH: i64 = 10_000;

impl Broker {
    /// Writes completed jobs to the history in one statement, within [`Broker::call_deadline`].
    /// Rows already written (a retry) are left as they are.
    pub async fn record_history(&self, rows: &[HistoryRow]) -> Result<(), BrokerError> {
        const ABOUT: &str = "recording completed jobs";
        if rows.is_empty() {
            return Ok(());
        }
        let ids: Vec<i64> = rows.iter().map(|r| r.id).collect();
        let attempts: Vec<i32> = rows.iter().map(|r| r.attempt).collect();
        let queues: Vec<&str> = rows.iter().map(|r| r.queue.as_str()).collect();
        let classes: Vec<&str> = rows.iter().map(|r| r.class.as_str()).collect();
        let payloads: Vec<&str> = rows.iter().map(|r| r.payload.as_str()).collect();
        let pids: Vec<i32> = rows.iter().map(|r| r.worker_pid).collect();
        let started: Vec<f64> = rows.iter().map(|r| epoch_secs(r.started_at)).collect();
        let finished: Vec<f64> = rows.iter().map(|r| epoch_secs(r.finished_at)).collect();
        let runtime: Vec<f64> = rows.iter().map(|r| ms(r.runtime)).collect();
        let wait: Vec<Option<f64>> = rows.iter().map(|r| r.wait.map(ms)).collect();
        let cpu: Vec<Option<f64>> = rows.iter().map(|r| r.cpu.map(ms)).collect();
        let memory: Vec<Option<i64>> = rows
            .iter()
            .map(|r| r.memory_kib.map(|k| i64::try_from(k).unwrap_or(i64::MAX)))
            .collect();
        let node = self.node();
        let hostname = self.hostname();
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 14] = [
            &node, &hostname, &ids, &attempts, &queues, &classes, &payloads, &pids, &started,
            &finished, &runtime, &wait, &cpu, &memory,
        ];
        self.side_execute(
            ABOUT,
            include_str!("../queries/record_history.sql"),
            &params,
        )
        .await
        .map(|_| ())
    }

    /// Deletes history rows that finished more than `older_than` ago, oldest first,
    /// [`TRIM_HISTORY_BATCH`] per statement, until fewer are left or `budget` has passed.
    pub async fn trim_history(
        &self,
        older_than: Duration,
        budget: Duration,
    ) -> Result<u64, BrokerError> {
        self.side_trim(
            "deleting old completed jobs",
            include_str!("../queries/trim_history.sql"),
            &older_than.as_secs_f64(),
            TRIM_HISTORY_BATCH,
            budget,
        )
        .await
    }
}
