//! The LISTEN connection: `NOTIFY drover_jobs` (sent by the insert trigger on commit) becomes a
//! wake-up of the master's claim loop, `NOTIFY drover_pauses` (sent when a queue is paused or
//! resumed, `migrations/0008_pause_confirmations.sql`) a re-read of the paused queues, and
//! `NOTIFY drover_limits` (a job enqueued under limits, a limit taken, or a slot freed while its
//! key was locked, `migrations/0011_limits.sql`) an admission pass. When the
//! connection drops it is re-opened with backoff (with jitter), and both wake-ups are sent after
//! every (re)connect since notifications may have been missed. It is opened by [`crate::connect::open`], so it uses the same TLS as the others; it
//! sets its own server-side timeouts ([`LISTENER_SESSION`]): no `statement_timeout` (its one
//! statement is `LISTEN`) and an `idle_in_transaction_session_timeout`, so that it can never
//! sit in an open transaction.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tokio::sync::Notify;
use tokio_postgres::AsyncMessage;

use crate::connect::{open, redact, Backoff, Connected, Session, STILL_FAILING_EVERY};

/// The channel the insert trigger notifies.
pub const CHANNEL: &str = "drover_jobs";

/// The channel a pause, a change of a pause or a resume notifies.
pub const PAUSES_CHANNEL: &str = "drover_pauses";

/// The channel a fleet restart's request to a master notifies (`drover.request_reload`).
pub const RELOADS_CHANNEL: &str = "drover_reloads";

/// The channel a note that a key may be able to admit notifies (`drover.limit_wakes`).
pub const LIMITS_CHANNEL: &str = "drover_limits";

/// The channel the console's requests to masters notify: a running job to stop
/// (`drover.stop_requests`), a pool's size (`drover.pool_sizes`).
pub const CONSOLE_CHANNEL: &str = "drover_console";

/// Who is woken by what.
#[derive(Clone, Default)]
pub struct Wakes {
    /// Jobs may be claimable (`drover_jobs`).
    pub jobs: Arc<Notify>,
    /// The paused queues changed (`drover_pauses`).
    pub pauses: Arc<Notify>,
    /// A fleet restart asked some master to reload (`drover_reloads`): each reads whether it
    /// was this one.
    pub reloads: Arc<Notify>,
    /// Jobs wait for limits whose keys may be able to admit (`drover_limits`): an admission
    /// pass. The admitter's timer notifies it too, when a key's wake-up time comes.
    pub limits: Arc<Notify>,
    /// The console asked something of masters (`drover_console`): a running job to stop, a
    /// pool's size; each master reads what concerns it.
    pub console: Arc<Notify>,
}

impl Wakes {
    /// Every one, after a (re)connect: notifications may have been missed meanwhile.
    fn all(&self) {
        self.jobs.notify_one();
        self.pauses.notify_one();
        self.reloads.notify_one();
        self.limits.notify_one();
        self.console.notify_one();
    }

    fn on(&self, channel: &str) {
        match channel {
            PAUSES_CHANNEL => self.pauses.notify_one(),
            RELOADS_CHANNEL => self.reloads.notify_one(),
            LIMITS_CHANNEL => self.limits.notify_one(),
            CONSOLE_CHANNEL => self.console.notify_one(),
            _ => self.jobs.notify_one(),
        }
    }
}

/// The LISTEN connection's server-side timeouts: `statement_timeout` off, and a session idle
/// in a transaction for a minute is ended (it never opens one; this makes sure).
pub const LISTENER_SESSION: Session = Session {
    statement_timeout: Some(Duration::ZERO),
    idle_in_transaction_timeout: Some(Duration::from_secs(60)),
};

/// The first and the longest wait between reconnection attempts. The longest is short: while
/// this connection is down, a job enqueued after the master's last claim wakes nobody (its
/// NOTIFY is missed) until the connection is back or the fallback poll comes. With 10 s, after a
/// 30-120 s failover a master sat idle for up to 8 s after the promotion while the others
/// served (bench shape 8 (c)); an attempt a second against a server that is down costs nothing.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(250), Duration::from_secs(1));

/// Spawns the listener task; `wakes` are notified on every NOTIFY of their channel and after
/// every (re)connect.
/// A lost connection is logged once, then at most every [`STILL_FAILING_EVERY`] while it
/// cannot be re-opened, and once more when it is.
pub fn spawn(url: String, wakes: Wakes) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut backoff = Backoff::new(BACKOFF.0, BACKOFF.1);
        // Since when, and when last said, while the connection is down.
        let mut down: Option<(Instant, Instant)> = None;
        loop {
            let mut subscribed = false;
            let e = listen(&url, &wakes, &mut down, &mut subscribed).await;
            if subscribed {
                backoff.reset();
            }
            let now = Instant::now();
            match &mut down {
                None => {
                    tracing::warn!(url = %redact(&url), "LISTEN connection: {e}; reconnecting with backoff");
                    down = Some((now, now));
                }
                Some((since, said)) if now.duration_since(*said) >= STILL_FAILING_EVERY => {
                    tracing::warn!(
                        url = %redact(&url),
                        "LISTEN connection still down after {}s: {e}",
                        now.duration_since(*since).as_secs()
                    );
                    *said = now;
                }
                Some(_) => tracing::debug!("LISTEN connection: {e}"),
            }
            tokio::time::sleep(backoff.next_delay()).await;
        }
    })
}

/// One LISTEN connection, until it fails (the error says why). Once LISTEN took effect it sets
/// `subscribed`, and says so if the connection was `down`.
async fn listen(
    url: &str,
    wakes: &Wakes,
    down: &mut Option<(Instant, Instant)>,
    subscribed: &mut bool,
) -> String {
    // The same connection string, TLS and timeout as every other connection of the master.
    let Connected {
        client,
        mut connection,
        address,
    } = match open(url).await {
        Ok(connected) => connected,
        Err(e) => return e.to_string(),
    };
    let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
    let drive = async {
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(n)) => wakes.on(n.channel()),
                Ok(_) => {}
                Err(e) => return Err(format!("connection to {address} lost: {e}")),
            }
        }
        Err(format!("connection to {address} closed"))
    };
    let subscribe = async {
        // One round trip each: `LISTEN drover_jobs` stays the backend's last query, as
        // pg_stat_activity shows it.
        for sql in [
            LISTENER_SESSION.sql(),
            Some(format!("LISTEN {PAUSES_CHANNEL}")),
            Some(format!("LISTEN {RELOADS_CHANNEL}")),
            Some(format!("LISTEN {LIMITS_CHANNEL}")),
            Some(format!("LISTEN {CONSOLE_CHANNEL}")),
            Some(format!("LISTEN {CHANNEL}")),
        ]
        .into_iter()
        .flatten()
        {
            client
                .batch_execute(&sql)
                .await
                .map_err(|e| format!("LISTEN failed: {}", crate::error::describe(&e)))?;
        }
        *subscribed = true;
        if let Some((since, _)) = down.take() {
            tracing::info!(
                "LISTEN connection restored after {}s",
                since.elapsed().as_secs()
            );
        }
        wakes.all();
        std::future::pending::<Result<(), String>>().await
    };
    let result: Result<(), String> = tokio::select! {
        r = drive => r,
        r = subscribe => r,
    };
    result.err().unwrap_or_default()
}
