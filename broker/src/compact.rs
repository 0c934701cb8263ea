//! Giving back the space a drained backlog left behind.
//!
//! A million jobs enqueued and drained leave `drover.jobs` empty but large: VACUUM makes the heap's
//! pages reusable (and truncates the empty tail when it can), but a B-tree keeps every page it ever
//! split into. Steady traffic reuses those pages; after a one-off backlog they are dead weight in
//! backups, replicas and the buffer cache. So when the table is empty and still bigger than
//! [`COMPACT_ABOVE`], [`compact_when_empty`] vacuums it and rebuilds its indexes. The rooms where
//! jobs wait before `drover.jobs` — `drover.limit_waiting` (their limits) and `drover.group_jobs`
//! (behind their group's head) — fill and drain with a backlog as well, and are compacted the same
//! way, each on its own.
//!
//! It runs on a connection of its own, so a slow VACUUM never delays a claim or a renewal. The
//! rebuild (`drover.reindex_drained`, migration 0013: REINDEX needs the table's owner, which a
//! master's least-privilege role is not) holds a SHARE lock (enqueues and claims wait) for the
//! few milliseconds that rebuilding the indexes of an empty table takes; it asks for that lock
//! with a short `lock_timeout`, gives up when another session is in the way, and checks emptiness
//! again under the lock, so it never rebuilds over a backlog that arrived meanwhile.

use crate::{connect, Broker, BrokerConfig, BrokerError};

/// An empty table larger than this (heap, indexes and TOAST) is compacted. A fresh `drover.jobs`
/// takes about 40 KiB; 4 MiB is a backlog of a few ten thousand jobs that is gone.
pub const COMPACT_ABOVE: i64 = 4 * 1024 * 1024;

/// What a compaction pass found and did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compaction {
    /// Jobs are queued or held: nothing to do.
    NotEmpty,
    /// Empty and already small: nothing to do.
    Small { bytes: i64 },
    /// Another session held the table; tried again at the next pass.
    Busy,
    /// Vacuumed and reindexed.
    Compacted { before: i64, after: i64 },
}

/// The tables a pass looks after, in its order: the queue, and the rooms where jobs wait before it.
pub const COMPACTED: [&str; 3] = ["drover.jobs", "drover.limit_waiting", "drover.group_jobs"];

/// What a pass found and did to one of the [`COMPACTED`] tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableCompaction {
    /// Which table.
    pub table: &'static str,
    /// What was found and done.
    pub outcome: Compaction,
}

/// Whether `drover.jobs` is empty and its size in bytes, on the caller's connection.
pub async fn queue_size(client: &tokio_postgres::Client) -> Result<(bool, i64), BrokerError> {
    table_size(client, COMPACTED[0]).await
}

/// Whether `table` (one of [`COMPACTED`]) is empty and its size in bytes, on the caller's connection.
async fn table_size(
    client: &tokio_postgres::Client,
    table: &'static str,
) -> Result<(bool, i64), BrokerError> {
    let sql = include_str!("../queries/table_size.sql").replace("{table}", table);
    let row = client
        .query_one(&sql, &[])
        .await
        .map_err(BrokerError::query("measuring a table drover compacts"))?;
    Ok((row.get(0), row.get(1)))
}

/// Vacuums each of the [`COMPACTED`] tables and rebuilds its indexes if it is empty and larger
/// than [`COMPACT_ABOVE`]; opens (and closes) a connection of its own for that, with
/// [`BrokerConfig::compaction_session`]'s server-side timeouts (a `statement_timeout` long
/// enough for VACUUM and REINDEX).
pub async fn compact_when_empty(
    config: &BrokerConfig,
) -> Result<Vec<TableCompaction>, BrokerError> {
    let client =
        connect::connect_once_with(&config.database_url, &config.compaction_session()).await?;
    let mut done = Vec::with_capacity(COMPACTED.len());
    for table in COMPACTED {
        let outcome = compact_table(&client, table).await?;
        done.push(TableCompaction { table, outcome });
    }
    Ok(done)
}

/// One table of [`compact_when_empty`], on its connection.
async fn compact_table(
    client: &tokio_postgres::Client,
    table: &'static str,
) -> Result<Compaction, BrokerError> {
    let (empty, before) = table_size(client, table).await?;
    if !empty {
        return Ok(Compaction::NotEmpty);
    }
    if before <= COMPACT_ABOVE {
        return Ok(Compaction::Small { bytes: before });
    }
    // VACUUM cannot run inside a transaction block: one statement per call. A master whose
    // role does not own the table (docs/postgres-roles.md) is refused with a warning, not an
    // error, and leaves the heap to autovacuum; the indexes are what autovacuum never shrinks.
    client
        .batch_execute(&format!("VACUUM {table}"))
        .await
        .map_err(BrokerError::query("vacuuming a drained table"))?;
    // The lock, the second look and the rebuild, with the owner's right to REINDEX
    // (drover.reindex_drained, migration 0013).
    let outcome: String = client
        .query_one(
            "SELECT drover.reindex_drained($1::text::regclass)",
            &[&table],
        )
        .await
        .map_err(BrokerError::query(
            "rebuilding the indexes of a drained table",
        ))?
        .get(0);
    match outcome.as_str() {
        "busy" => return Ok(Compaction::Busy),
        "not_empty" => return Ok(Compaction::NotEmpty),
        _ => {}
    }
    let (_, after) = table_size(client, table).await?;
    Ok(Compaction::Compacted { before, after })
}

impl Broker {
    /// Compacts `drover.jobs` and the rooms where jobs wait before it, each if it is empty but
    /// large (see the module's doc), on a connection of its own. Its deadline is the compaction's `statement_timeout` (10 minutes by default,
    /// [`BrokerConfig::compaction_session`]) plus half a lease; the main connection is not
    /// touched, so missing it marks nothing suspect.
    pub async fn compact_when_empty(&self) -> Result<Vec<TableCompaction>, BrokerError> {
        let limit = match self.config.compaction_session().statement_timeout {
            Some(t) if !t.is_zero() => t,
            _ => crate::config::COMPACTION_STATEMENT_TIMEOUT,
        } + self.call_deadline();
        tokio::time::timeout(limit, compact_when_empty(&self.config))
            .await
            .map_err(|_| BrokerError::TimedOut {
                about: "compacting drained tables",
            })?
    }
}
