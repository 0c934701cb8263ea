//! Long-wait alerts, as Horizon's: on each reap tick (every half lease) the queues with a
//! threshold (`long_waits.thresholds`, from `waits` in `config/drover.php`) are checked; a queue
//! whose oldest available job has waited longer raises an alert — logged, and handed to the
//! application through `long_waits.command` (`php artisan drover:long-wait --queue=Q
//! --seconds=S`, which fires `Drover\Events\LongWaitDetected` and sends the notifications).
//! A job waiting behind its ordered group's head, or for a limit's key, waits too: when such a
//! job has waited longer than the queue's oldest available one, the alert names its group
//! (`--group=G`) or its key (`--key=K`).
//! The database keeps when each queue last alerted, so of several masters one alerts, once per
//! cooldown (docs/metrics.md, "Long-wait alerts").

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use drover_broker::{HeldBy, HeldWait};

use crate::config::LongWaits;
use crate::store::Maintenance;

/// The most the alert command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// One check at a time.
#[derive(Debug, Default)]
pub struct LongWaitWatch {
    /// The running check, if any.
    check: Option<tokio::task::JoinHandle<()>>,
}

impl LongWaitWatch {
    /// Starts a check of the queues `config` watches unless one is still running (a slow
    /// database, a slow command). The alert command runs in `cwd`.
    pub fn tick(&mut self, config: &LongWaits, cwd: Option<PathBuf>, store: Arc<dyn Maintenance>) {
        let watched = config.watched();
        if watched.is_empty() || self.check.as_ref().is_some_and(|t| !t.is_finished()) {
            return;
        }
        let check = Check {
            watched,
            cooldown: config.cooldown(),
            command: config.command.clone(),
            cwd,
            store,
        };
        self.check = Some(tokio::spawn(check.run()));
    }
}

/// One check, run on its own task: what it watches and how it alerts.
struct Check {
    /// The queues with a threshold, and their thresholds.
    watched: Vec<(String, Duration)>,
    /// Between two alerts for one queue, fleet-wide.
    cooldown: Duration,
    /// The application's alert command (`long_waits.command`), if any.
    command: Option<Vec<String>>,
    /// Where the alert command runs.
    cwd: Option<PathBuf>,
    /// Where the waits are read and each queue's last alert is kept.
    store: Arc<dyn Maintenance>,
}

impl Check {
    /// Reads each watched queue's longest wait and alerts for those over their threshold.
    async fn run(self) {
        let queues: Vec<String> = self.watched.iter().map(|(q, _)| q.clone()).collect();
        let (waits, held_waits) = tokio::join!(
            self.store.oldest_waits(&queues),
            self.store.oldest_held_waits(&queues)
        );
        let (waits, held_waits) = match (waits, held_waits) {
            (Ok(waits), Ok(held_waits)) => (waits, held_waits),
            (Err(e), _) | (_, Err(e)) => {
                tracing::debug!("long-wait check: {e}");
                return;
            }
        };
        for (queue, waited, held_by) in longest_waits(waits, held_waits) {
            let Some(threshold) = self.watched.iter().find(|(q, _)| *q == queue).map(|w| w.1)
            else {
                continue;
            };
            if waited <= threshold {
                continue;
            }
            self.alert(&queue, waited, held_by, threshold).await;
        }
    }

    /// Alerts for `queue`, whose longest wait (of a job held by `held_by`, if named) is over
    /// its threshold — unless it was alerted within the cooldown, by this master or another.
    async fn alert(
        &self,
        queue: &str,
        waited: Duration,
        held_by: Option<HeldBy>,
        threshold: Duration,
    ) {
        let taken = match self
            .store
            .claim_long_wait_notice(queue, waited, self.cooldown)
            .await
        {
            Ok(Some(taken)) => taken,
            // Alerted within the cooldown (by this master or another).
            Ok(None) => return,
            Err(e) => {
                tracing::warn!("long-wait alert for queue {queue}: {e}");
                return;
            }
        };
        let seconds = waited.as_secs();
        let of = match &held_by {
            Some(HeldBy::Group(group)) => {
                format!("a job of group {group} (behind its head) in queue {queue}")
            }
            Some(HeldBy::Key(key)) => {
                format!("a job waiting for limit key {key} in queue {queue}")
            }
            None => format!("the oldest job of queue {queue}"),
        };
        tracing::warn!(
            queue,
            waited_secs = seconds,
            threshold_secs = threshold.as_secs(),
            "long wait: {of} has waited {seconds} s, over its threshold of {} s",
            threshold.as_secs()
        );
        if let Some(command) = &self.command {
            self.run_command(command, queue, seconds, held_by.as_ref(), taken)
                .await;
        }
    }

    /// Hands the alert to the application's command; when it fails, gives the notice back so
    /// the next check alerts again.
    async fn run_command(
        &self,
        command: &[String],
        queue: &str,
        seconds: u64,
        held_by: Option<&HeldBy>,
        taken: f64,
    ) {
        let mut full = command.to_vec();
        full.push(format!("--queue={queue}"));
        full.push(format!("--seconds={seconds}"));
        match held_by {
            Some(HeldBy::Group(group)) => full.push(format!("--group={group}")),
            Some(HeldBy::Key(key)) => full.push(format!("--key={key}")),
            None => {}
        }
        if let Err(e) =
            crate::process::app_command::run(&full, self.cwd.as_deref(), COMMAND_TIMEOUT).await
        {
            tracing::error!("the long-wait alert for queue {queue} was not sent: {e}; it is tried again at the next check");
            // Give the right back: the next check alerts again rather than staying
            // silent for a whole cooldown.
            if let Err(e) = self.store.release_long_wait_notice(queue, taken).await {
                tracing::warn!("giving back the long-wait alert for queue {queue}: {e}");
            }
        }
    }
}

/// Per queue, its longest wait: the oldest available job's, or a held job's (behind its group's
/// head, or for a limit's key) when that is longer, then with what holds it.
fn longest_waits(
    waits: Vec<(String, Duration)>,
    held_waits: Vec<HeldWait>,
) -> Vec<(String, Duration, Option<HeldBy>)> {
    let mut longest: Vec<(String, Duration, Option<HeldBy>)> =
        waits.into_iter().map(|(q, w)| (q, w, None)).collect();
    for held in held_waits {
        match longest.iter_mut().find(|(q, _, _)| *q == held.queue) {
            Some(entry) if entry.1 >= held.waited => {}
            Some(entry) => *entry = (held.queue, held.waited, Some(held.held_by)),
            None => longest.push((held.queue, held.waited, Some(held.held_by))),
        }
    }
    longest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(queue: &str, held_by: HeldBy, secs: u64) -> HeldWait {
        HeldWait {
            queue: queue.into(),
            held_by,
            waited: Duration::from_secs(secs),
        }
    }

    #[test]
    fn a_held_job_waiting_longer_than_the_queues_oldest_names_its_group_or_key() {
        let s = Duration::from_secs;
        let got = longest_waits(
            vec![("a".into(), s(10)), ("b".into(), s(90)), ("d".into(), s(3))],
            vec![
                held("a", HeldBy::Group("order-1".into()), 70),
                held("b", HeldBy::Group("order-2".into()), 20),
                held("c", HeldBy::Group("order-3".into()), 5),
                held("d", HeldBy::Key("api".into()), 40),
            ],
        );
        assert_eq!(
            got,
            vec![
                ("a".into(), s(70), Some(HeldBy::Group("order-1".into()))),
                ("b".into(), s(90), None),
                ("d".into(), s(40), Some(HeldBy::Key("api".into()))),
                ("c".into(), s(5), Some(HeldBy::Group("order-3".into()))),
            ]
        );
    }
}
