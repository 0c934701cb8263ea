//! The LISTEN connection: `NOTIFY drover_jobs` (sent by the insert trigger on commit) becomes a
//! wake-up of the master's claim loop. When the connection drops it is re-opened with backoff,
//! and a wake-up is sent after every (re)connect since notifications may have been missed. It
//! is opened by [`crate::connect::open`], so it uses the same TLS as the others.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::Notify;
use tokio_postgres::AsyncMessage;

use crate::connect::{open, redact, Connected};

/// The channel the insert trigger notifies.
pub const CHANNEL: &str = "drover_jobs";

/// Spawns the listener task; `wake` is notified on every NOTIFY and after every (re)connect.
pub fn spawn(url: String, wake: Arc<Notify>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut delay = Duration::from_millis(250);
        loop {
            match listen(&url, &wake).await {
                Ok(()) => delay = Duration::from_millis(250),
                Err(e) => {
                    tracing::warn!(url = %redact(&url), "LISTEN connection: {e}; reconnecting in {delay:?}");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(10));
                }
            }
        }
    })
}

async fn listen(url: &str, wake: &Notify) -> Result<(), String> {
    // The same connection string, TLS and timeout as every other connection of the master.
    let Connected {
        client,
        mut connection,
        address,
    } = open(url).await.map_err(|e| e.to_string())?;
    let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
    let drive = async {
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(_)) => wake.notify_one(),
                Ok(_) => {}
                Err(e) => return Err(format!("connection to {address} lost: {e}")),
            }
        }
        Err(format!("connection to {address} closed"))
    };
    let subscribe = async {
        client
            .batch_execute(&format!("LISTEN {CHANNEL}"))
            .await
            .map_err(|e| format!("LISTEN failed: {e}"))?;
        wake.notify_one();
        std::future::pending::<Result<(), String>>().await
    };
    tokio::select! {
        r = drive => r,
        r = subscribe => r,
    }
}
