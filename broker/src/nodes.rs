//! This master's row in `drover.nodes`: the heartbeat that keeps it (and removes the rows of
//! masters gone silent), the outage grace it holds, the fleet restart requests made of it, and
//! its removal. The row is registered by [`Broker::start`].

use std::time::Duration;

use crate::leases::NodeId;
use crate::{clock, Broker, BrokerError};

impl Broker {
    /// Asks for an outage grace of up to `grace` (a reload added a pool with a longer one). The
    /// node row's grace is raised at the next heartbeat; until then claims give their leases
    /// no more than the row already holds ([`crate::Claimed::grace`]). The row's grace never shrinks
    /// while this master lives: leases it took under a longer one may still be held.
    pub fn want_grace(&self, grace: Duration) {
        self.grace_wanted_ms
            .fetch_max(clock::millis(grace), std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether an outage grace is in force: every other master with a row honours one. While
    /// a master of release 0.1 has a row, claims give no grace, and a lease taken with one is
    /// fenced as if it had none (that master's reap takes it back at its lease's end).
    pub fn grace_in_force(&self) -> bool {
        self.fleet_honours_grace
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The outage grace the node row holds, the most a claim gives its leases.
    pub fn registered_grace(&self) -> Duration {
        Duration::from_millis(
            self.grace_registered_ms
                .load(std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// Marks this node alive, with its status document (JSON: pools, workers, circuits) when
    /// given, and removes the rows of nodes gone silent, by the database's clock. A row another
    /// master removed (this one was silent for ten leases) is registered again under the same id,
    /// and said so: true then (what the row said of this master, the queue pauses it confirmed
    /// among it, is gone). Within [`Broker::call_deadline`].
    pub async fn heartbeat(&self, status: Option<&str>) -> Result<bool, BrokerError> {
        const ABOUT: &str = "node heartbeat";
        let call = async {
            let registered = self.registered.lock().await;
            if !*registered {
                return Ok(false); // this master left: nothing brings its row back
            }
            let conn = self.conn().await?;
            let timeout = self.config.node_timeout.as_secs_f64();
            let pid = std::process::id() as i32;
            let lease = self.config.lease.as_secs_f64();
            let grace = self
                .grace_wanted_ms
                .load(std::sync::atomic::Ordering::Relaxed) as f64
                / 1000.0;
            let row = conn
                .client
                .query_one(
                    &conn.heartbeat,
                    &[
                        &self.node,
                        &self.clock.now(),
                        &timeout,
                        &status,
                        &self.hostname,
                        &pid,
                        &lease,
                        &grace,
                        &self.config.release,
                    ],
                )
                .await
                .map_err(BrokerError::query(ABOUT))?;
            let honoured: bool = row.get(3);
            self.row_confirmed
                .store(true, std::sync::atomic::Ordering::Relaxed);
            let was = self
                .fleet_honours_grace
                .swap(honoured, std::sync::atomic::Ordering::Relaxed);
            if was != honoured {
                match honoured {
                    true => tracing::info!("every master of this database now honours an outage grace: pools with outage_grace use it"),
                    false => tracing::warn!("a master of drover 0.1 has a row in drover.nodes: no outage grace is given or relied on until it is gone (its reap would take such a lease back at its end; docs/upgrading.md)"),
                }
            }
            if let Some(held) = row.get::<_, Option<f64>>(2) {
                let held = Duration::try_from_secs_f64(held).unwrap_or_default();
                self.grace_registered_ms
                    .store(clock::millis(held), std::sync::atomic::Ordering::Relaxed);
            }
            self.clock_offset_ms.store(
                clock::offset_ms(row.get(0)),
                std::sync::atomic::Ordering::Relaxed,
            );
            let again = row.get::<_, Option<bool>>(1) == Some(true);
            if again {
                tracing::warn!(
                    node = self.node,
                    "this master's node row had been removed (it was silent for ten leases or more, and another master took it for gone): registered again"
                );
            }
            Ok(again)
        };
        self.bounded(ABOUT, self.call_deadline(), call).await
    }

    /// For a fleet restart (`drover:restart --fleet`): records that this master applied request
    /// `done` (0: none yet) and returns the latest request made of it. Within
    /// [`Broker::call_deadline`].
    pub async fn fleet_reload(&self, done: i64) -> Result<i64, BrokerError> {
        const ABOUT: &str = "reading this master's fleet restart requests";
        let call = async {
            let conn = self.conn().await?;
            let rows = conn
                .client
                .query(
                    include_str!("../queries/fleet_reload.sql"),
                    &[&self.node, &done],
                )
                .await
                .map_err(BrokerError::query(ABOUT))?;
            Ok(rows.first().map_or(0, |r| r.get(0)))
        };
        self.bounded(ABOUT, self.call_deadline(), call).await
    }

    /// Removes the row a previous master of this state directory left behind when it did not
    /// exit cleanly (a crash, SIGKILL): `node` with `pid`, registered from this host. This master
    /// holds the state directory's lock, so that one is gone, and so are its workers (their
    /// parent-death signal); its row would only make queue pauses wait for it. True if a row was
    /// removed. Within [`Broker::call_deadline`].
    pub async fn remove_predecessor(&self, node: NodeId, pid: i32) -> Result<bool, BrokerError> {
        const ABOUT: &str = "removing the node row of this state directory's previous master";
        let call = async {
            let conn = self.conn().await?;
            let rows = conn
                .client
                .execute(
                    include_str!("../queries/remove_predecessor.sql"),
                    &[&node, &pid, &self.hostname, &self.node],
                )
                .await
                .map_err(BrokerError::query(ABOUT))?;
            Ok(rows == 1)
        };
        self.bounded(ABOUT, self.call_deadline(), call).await
    }

    /// Removes this node's row: it leaves (a clean exit, or a start that cannot go on). No
    /// heartbeat registers it again afterwards. Within [`Broker::call_deadline`].
    pub async fn deregister(&self) -> Result<(), BrokerError> {
        const ABOUT: &str = "removing this node's row";
        let call = async {
            // From here no heartbeat registers the row again, and none is in flight.
            let mut registered = self.registered.lock().await;
            *registered = false;
            let conn = self.conn().await?;
            conn.client
                .execute(
                    include_str!("../queries/deregister_node.sql"),
                    &[&self.node],
                )
                .await
                .map_err(BrokerError::query(ABOUT))?;
            Ok(())
        };
        self.bounded(ABOUT, self.call_deadline(), call).await
    }
}
