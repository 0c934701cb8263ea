//! What holds the database's vacuum horizon back (`queries/horizon.sql`).
//!
//! Every job drover settles leaves dead rows that only VACUUM removes, and VACUUM removes none
//! that an open snapshot might still see. Another application's report in REPEATABLE READ, a
//! `pg_dump`, a request left idle in its transaction, a standby with `hot_standby_feedback` or a
//! forgotten replication slot keeps them all, and each claim then walks past more of them
//! (docs/decisions/0010-a-held-snapshot.md). This reads the oldest such holder, for `drover
//! status`, `/metrics` and the master's alert.

use std::time::Duration;

use crate::clock::seconds;
use crate::{Broker, BrokerError};

/// What kind of thing holds the horizon back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HolderKind {
    /// A session of this database with a snapshot or a transaction id.
    Session,
    /// A standby whose `hot_standby_feedback` its walsender carries.
    Standby,
    /// A replication slot's `xmin`.
    ReplicationSlot,
    /// A prepared transaction (`PREPARE TRANSACTION`) not yet committed or rolled back.
    PreparedTransaction,
}

impl HolderKind {
    /// Its name in `drover status` and `/metrics`.
    pub fn as_str(self) -> &'static str {
        match self {
            HolderKind::Session => "session",
            HolderKind::Standby => "standby",
            HolderKind::ReplicationSlot => "replication_slot",
            HolderKind::PreparedTransaction => "prepared_transaction",
        }
    }

    fn parse(s: &str) -> HolderKind {
        match s {
            "standby" => HolderKind::Standby,
            "replication_slot" => HolderKind::ReplicationSlot,
            "prepared_transaction" => HolderKind::PreparedTransaction,
            _ => HolderKind::Session,
        }
    }
}

/// The oldest holder of the horizon.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapshotHolder {
    pub kind: HolderKind,
    /// The backend holding it (a session's, a walsender's, an active slot's).
    pub pid: Option<i32>,
    /// Who it is: a session's `application_name` (its backend type when it set none), a slot's
    /// name, a prepared transaction's gid.
    pub name: String,
    /// The role it runs as, where PostgreSQL says.
    pub role: Option<String>,
    /// A session's state (`idle in transaction` …), a slot's `active`/`inactive`.
    pub state: Option<String>,
    /// How many transaction ids old the oldest thing it holds is.
    pub xid_age: i64,
    /// How long its transaction has been open, where PostgreSQL knows (sessions and prepared
    /// transactions).
    pub open_for: Option<Duration>,
    /// A session's latest statement, cut at 200 characters: what to look for in the
    /// application.
    pub query: Option<String>,
    /// The transaction id it holds the horizon at: with its kind, pid and name, it tells one
    /// holding from the next (the same session in a new transaction).
    pub xmin: Option<i64>,
}

/// The horizon as one read saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Horizon {
    /// Its oldest holder; none when nothing holds a snapshot.
    pub oldest: Option<SnapshotHolder>,
    /// The dead tuples PostgreSQL's statistics count in `drover.jobs`.
    pub jobs_dead_tuples: Option<i64>,
    /// Whether this role sees every session's snapshot: without `pg_read_all_stats` (or
    /// `pg_monitor`) PostgreSQL hides other roles' and the oldest may go unseen.
    pub sees_all_sessions: bool,
}

impl Broker {
    /// The database's vacuum horizon ([`Horizon`]), on the side connection within
    /// [`Broker::call_deadline`].
    pub async fn horizon(&self) -> Result<Horizon, BrokerError> {
        let rows = self
            .side_query(
                "reading what holds the vacuum horizon back",
                include_str!("../queries/horizon.sql"),
                &[],
            )
            .await?;
        let Some(r) = rows.first() else {
            return Ok(Horizon {
                oldest: None,
                jobs_dead_tuples: None,
                sees_all_sessions: false,
            });
        };
        let oldest = r.get::<_, Option<&str>>(0).map(|kind| SnapshotHolder {
            kind: HolderKind::parse(kind),
            pid: r.get(1),
            name: r.get::<_, Option<String>>(2).unwrap_or_default(),
            role: r.get(3),
            state: r.get(4),
            xid_age: r.get::<_, Option<i64>>(5).unwrap_or(0),
            open_for: r.get::<_, Option<f64>>(6).map(seconds),
            query: r.get(7),
            xmin: r.get(8),
        });
        Ok(Horizon {
            oldest,
            jobs_dead_tuples: r.get(9),
            sees_all_sessions: r.get(10),
        })
    }
}
