//! What running jobs say of their progress (`$this->progress(40, 'parsed 4,000 rows')`, any job;
//! migration 0016 stores it in drover.job_progress, one row per job): read for the jobs a
//! master's workers run, for `drover status` and `/metrics` (`queries/job_progress.sql`).

use std::time::Duration;

use crate::clock::seconds;
use crate::{Broker, BrokerError, JobId};

/// At most this many jobs' progress is read at once (a master runs one job per worker).
pub const PROGRESS_READ_MAX: usize = 10_000;

/// A job's latest progress report.
#[derive(Debug, Clone, PartialEq)]
pub struct JobProgress {
    pub job: JobId,
    /// 0 to 100.
    pub percent: u8,
    /// What the job said with it, if anything (at most 500 characters).
    pub note: Option<String>,
    /// How long ago it was reported, by the database's clock.
    pub reported_ago: Duration,
}

impl Broker {
    /// The latest progress reports of `jobs` (the first [`PROGRESS_READ_MAX`]), by job id; a job
    /// that reported none is absent. No statement when `jobs` is empty. On the side connection,
    /// within [`Broker::call_deadline`].
    pub async fn job_progress(&self, jobs: &[JobId]) -> Result<Vec<JobProgress>, BrokerError> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let jobs = &jobs[..jobs.len().min(PROGRESS_READ_MAX)];
        let now = self.clock.now();
        let rows = self
            .side_query(
                "reading the progress of running jobs",
                include_str!("../queries/job_progress.sql"),
                &[&jobs, &now],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| JobProgress {
                job: r.get(0),
                percent: u8::try_from(r.get::<_, i16>(1).clamp(0, 100)).unwrap_or(0),
                note: r.get(2),
                reported_ago: seconds(r.get(3)),
            })
            .collect())
    }
}
