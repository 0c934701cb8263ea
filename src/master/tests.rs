//! The loop's decisions, on a [`Master`] built with a fake store ([`FakeStore`]), no pool and no
//! lease guard process: what reaches the store when the loop reacts to an event.

use std::sync::Arc;
use std::time::{Duration, Instant};

use drover_broker::{Lease, Settle};
use tokio::sync::{mpsc, Notify};

use super::timers::Tick;
use super::{Master, MasterConfig, Reloading};
use crate::config::{PoolSpec, RunConfig};
use crate::master::pools::setup::{build_pools, ConfigSource, WorkerContext};
use crate::process::lease_guard::GuardClient;
use crate::process::systemd::Notifier;
use crate::store::fake::FakeStore;

/// A master over `store` with no pool, as `main` builds one (without its lease guard process).
fn master(store: Arc<FakeStore>) -> Master {
    master_of(store, RunConfig::defaults_with(Vec::new()))
}

/// A master over `store` running `run`'s pools, built as `main` builds them and never started:
/// no worker runs, so none says hello.
fn master_of(store: Arc<FakeStore>, run: RunConfig) -> Master {
    let (_control_tx, control_rx) = mpsc::unbounded_channel();
    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let context = WorkerContext {
        run_as: None,
        embedded_dsn: None,
        zygotes: None,
    };
    let pools = build_pools(&run, &context, &events_tx).unwrap();
    Master::new(
        MasterConfig::default(),
        store,
        pools,
        (events_tx, events_rx),
        control_rx,
        Arc::new(Notify::new()),
        Reloading {
            source: ConfigSource {
                path: None,
                reload_command: None,
                cwd: None,
            },
            current: run,
            context,
        },
        Notifier::from_environment(),
        GuardClient::not_started(),
    )
}

/// Runs the loop's reaction to its own database tasks until `done` holds of the store.
async fn until(master: &mut Master, store: &FakeStore, done: impl Fn(&FakeStore) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done(store) {
        assert!(Instant::now() < deadline, "the loop never got there");
        if let Ok(Some(internal)) =
            tokio::time::timeout(Duration::from_millis(20), master.internal_rx.recv()).await
        {
            master.on_internal(internal);
        }
    }
}

#[tokio::test]
async fn the_jobs_of_a_claim_whose_answer_was_lost_go_back_uncharged_at_the_next_renewal() {
    let store = Arc::new(FakeStore::default());
    let lost = [Lease { id: 7, token: 70 }, Lease { id: 8, token: 70 }];
    store.lose_the_answer_of_a_claim(lost.to_vec());
    let mut master = master(store.clone());
    master.on_tick(Tick::Renew);
    until(&mut master, &store, |s| s.settled().len() == 2).await;
    for lease in lost {
        assert!(
            store.settled().contains(&Settle::Release {
                lease,
                delay: Duration::ZERO,
                charged: false,
            }),
            "{lease:?} given back uncharged: {:?}",
            store.settled()
        );
    }
    assert_eq!(master.tally.returned_unstarted, 2);
    // Nothing was held, so nothing was renewed; the question was asked once.
    assert_eq!(store.statements(), (0, 0, 1));
}

#[tokio::test]
async fn a_renewal_with_nothing_held_and_no_claim_in_doubt_asks_the_database_nothing() {
    let store = Arc::new(FakeStore::default());
    let mut master = master(store.clone());
    master.on_tick(Tick::Renew);
    assert!(!master.renewing, "no renewal task was started");
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(store.statements(), (0, 0, 0));
    assert!(store.settled().is_empty());
}

#[tokio::test]
async fn a_pool_whose_workers_never_said_hello_claims_nothing_however_often_it_is_woken() {
    let store = Arc::new(FakeStore::default());
    let pool = PoolSpec::defaults_with("default", vec!["default".into()], 2, vec!["php".into()]);
    let mut master = master_of(store.clone(), RunConfig::defaults_with(vec![pool]));
    for _ in 0..3 {
        master.want_claims();
        for id in master.pools.ids() {
            master.maybe_claim(id);
        }
        master.on_tick(Tick::Poll);
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(store.statements(), (0, 0, 0), "no credit, no claim");
}
