//! The loop's decisions, on a [`Master`] built with a fake store ([`FakeStore`]), no lease guard
//! process and no PHP: pools are built as `main` builds them (and as a reload does, from a context
//! whose `stand_ins` is set), and their workers are stand-ins
//! (`drover_supervisor::pool::StandIn`) whose frames the test sends and whose frames from the
//! master it reads. Each test asserts what reaches the store and the
//! workers when the loop reacts to events.

use std::sync::Arc;
use std::time::{Duration, Instant};

use drover_broker::listener::Wakes;
use drover_broker::{Lease, LeasedJob, Settle};
use drover_supervisor::pool::StandIn;
use drover_supervisor::{FromWorker, ToWorker, WorkerEvent, WorkerId, PROTOCOL_VERSION};
use tokio::sync::mpsc;

use super::timers::Tick;
use super::{Master, MasterConfig, Reloading};
use crate::config::{PoolSpec, RunConfig};
use crate::master::pools::setup::{build_pools, ConfigSource, WorkerContext};
use crate::master::pools::PoolId;
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
    master_configured(store, run, MasterConfig::default())
}

fn master_configured(store: Arc<FakeStore>, run: RunConfig, config: MasterConfig) -> Master {
    let (_control_tx, control_rx) = mpsc::unbounded_channel();
    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let context = WorkerContext {
        embedded_dsn: None,
        zygotes: None,
        stand_ins: true,
    };
    let pools = build_pools(&run, &context, &events_tx).unwrap();
    Master::new(
        config,
        store,
        pools,
        (events_tx, events_rx),
        control_rx,
        Wakes::default(),
        Reloading::new(
            ConfigSource {
                path: None,
                reload_command: None,
                cwd: None,
            },
            run,
            context,
        ),
        Notifier::from_environment(),
        GuardClient::not_started(),
    )
}

/// Runs the loop's reaction to its own database tasks until `done` holds of the store.
async fn until(master: &mut Master, store: &FakeStore, done: impl Fn(&FakeStore) -> bool) {
    until_master(master, |_| done(store)).await
}

/// Runs the loop's reaction to its own database tasks until `done` holds of the master.
async fn until_master(master: &mut Master, done: impl Fn(&Master) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done(master) {
        assert!(Instant::now() < deadline, "the loop never got there");
        if let Ok(Some(internal)) =
            tokio::time::timeout(Duration::from_millis(20), master.inbox.internal.recv()).await
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
    assert_eq!(master.totals().returned_unstarted, 2);
    // Nothing was held, so nothing was renewed; the question was asked once.
    assert_eq!(store.statements(), (0, 0, 1));
}

#[tokio::test]
async fn a_renewal_with_nothing_held_and_no_claim_in_doubt_asks_the_database_nothing() {
    let store = Arc::new(FakeStore::default());
    let mut master = master(store.clone());
    master.on_tick(Tick::Renew);
    assert_eq!(
        master.leases.renewal(),
        super::leases::Renewal::Idle,
        "no renewal task was started"
    );
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
        master.claimer.want_all();
        for id in master.pools.ids() {
            master.maybe_claim(id);
        }
        master.on_tick(Tick::Poll);
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(store.statements(), (0, 0, 0), "no credit, no claim");
}

/// A job as a claim returns it: default queue, first attempt, token ten times its id.
fn job(id: i64) -> LeasedJob {
    leased(id, "default", r#"{"uuid":"u","job":"App\\Jobs\\Nothing"}"#)
}

/// A job as a claim leases it (attempt 1, token id × 10), for the tests of the master's parts.
pub(super) fn leased(id: i64, queue: &str, payload: &str) -> LeasedJob {
    LeasedJob {
        id,
        queue: queue.into(),
        payload: payload.into(),
        attempts: 1,
        max_attempts: None,
        token: id * 10,
        failure: None,
        waited: Duration::ZERO,
        grouped: false,
    }
}

fn lease(id: i64) -> Lease {
    Lease { id, token: id * 10 }
}

/// The loop's reactions to its own database tasks, until none comes for a while.
async fn settle_down(master: &mut Master) {
    while let Ok(Some(internal)) =
        tokio::time::timeout(Duration::from_millis(100), master.inbox.internal.recv()).await
    {
        master.on_internal(internal);
    }
}

/// The settles written once `done` holds of them (the settler writes in a task of its own).
async fn settled_once(store: &FakeStore, done: impl Fn(&[Settle]) -> bool) -> Vec<Settle> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let settled = store.settled();
        if done(&settled) || Instant::now() > deadline {
            return settled;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn frame(master: &mut Master, worker: WorkerId, frame: FromWorker) {
    master.on_worker_event(WorkerEvent::Frame { worker, frame });
}

fn hello(master: &mut Master, worker: &StandIn, prefetch: u32) {
    let pid = worker.pid;
    frame(
        master,
        worker.id,
        FromWorker::Hello {
            v: PROTOCOL_VERSION,
            pid,
            prefetch,
            max_jobs: 0,
        },
    );
}

/// A master with one pool of one stand-in worker, whose acks go to the settler at once, once it
/// has read which queues are paused (it claims nothing before).
async fn master_with_one_worker(store: Arc<FakeStore>) -> (Master, PoolId, StandIn) {
    let pool = PoolSpec::defaults_with("default", vec!["default".into()], 1, vec!["php".into()]);
    let config = MasterConfig {
        ack_ride_wait: Duration::ZERO,
        ..MasterConfig::default()
    };
    let mut master = master_configured(store, RunConfig::defaults_with(vec![pool]), config);
    master.maybe_read_queue_pauses(tokio::time::Instant::now());
    settle_down(&mut master).await;
    let id = master.pools.ids().next().unwrap();
    let worker = stand_ins(&mut master, id).remove(0);
    (master, id, worker)
}

/// [`master_with_one_worker`], its worker (prefetch 2) holding jobs 1 and 2 from one claim.
async fn holding_jobs_1_and_2(store: Arc<FakeStore>) -> (Master, PoolId, StandIn) {
    let (mut master, pool, worker) = master_with_one_worker(store.clone()).await;
    store.will_lease(vec![job(1), job(2)]);
    hello(&mut master, &worker, 2);
    master.maybe_claim(pool);
    settle_down(&mut master).await;
    (master, pool, worker)
}

/// `worker` exits (how, unknown); the settles written once there are `n`.
async fn exit_and_settle(
    master: &mut Master,
    worker: &StandIn,
    store: &FakeStore,
    n: usize,
) -> Vec<Settle> {
    master.on_worker_event(WorkerEvent::Exited {
        worker: worker.id,
        pid: worker.pid,
        status: None,
        lived: Duration::from_secs(1),
    });
    settle_down(master).await;
    settled_once(store, |s| s.len() >= n).await
}

/// The pool's workers, started as stand-ins.
fn stand_ins(master: &mut Master, pool: PoolId) -> Vec<StandIn> {
    let pool = &mut master.pools[pool];
    pool.start().unwrap();
    pool.take_stand_ins()
}

#[tokio::test]
async fn a_pools_outage_grace_goes_with_its_claims_and_lengthens_the_hold_of_what_they_lease() {
    let store = Arc::new(FakeStore::default());
    let mut pool =
        PoolSpec::defaults_with("default", vec!["default".into()], 1, vec!["php".into()]);
    pool.outage_grace = 90.0;
    let mut master = master_of(store.clone(), RunConfig::defaults_with(vec![pool]));
    master.maybe_read_queue_pauses(tokio::time::Instant::now());
    settle_down(&mut master).await;
    let id = master.pools.ids().next().unwrap();
    let worker = stand_ins(&mut master, id).remove(0);
    store.will_lease(vec![job(1)]);
    hello(&mut master, &worker, 1);
    let sent = Instant::now();
    master.maybe_claim(id);
    settle_down(&mut master).await;
    assert_eq!(store.claim_graces(), [Duration::from_secs(90)]);
    let lease = master.store.lease_duration();
    let holds = master.pools[id].assignments.holds(true);
    assert_eq!(holds.len(), 1);
    // Held for the lease and the grace from when the claim was sent (the master's lease check
    // and the guard count from it, `rules::lease_deadlines`).
    assert!(holds[0].2 >= sent + lease + Duration::from_secs(90));
    assert!(holds[0].2 <= Instant::now() + lease + Duration::from_secs(90));
}

#[tokio::test]
async fn a_fleet_restarts_request_reloads_this_master_and_is_answered_once_the_reload_is_applied() {
    let store = Arc::new(FakeStore::default());
    let mut master = master(store.clone());
    // Nothing asked: reading the row starts no reload.
    master.read_fleet_reload();
    until_master(&mut master, |m| {
        m.reconfig.fleet_reload.done() == 0 && !m.reconfig.rereads.running()
    })
    .await;
    store.request_reload();
    master.handle(super::Event::ReloadAsked);
    until_master(&mut master, |m| m.reconfig.fleet_reload.done() == 1).await;
    until(&mut master, &store, |s| s.reload_done() == 1).await;
    // The same request read again (a reap pass looks too) reloads nothing more.
    master.read_fleet_reload();
    tokio::time::sleep(Duration::from_millis(50)).await;
    while let Ok(internal) = master.inbox.internal.try_recv() {
        master.on_internal(internal);
    }
    assert!(!master.reconfig.rereads.running());
    assert_eq!(store.reload_done(), 1);
    // The configuration was re-read: pool sizes set from the console are over.
    until(&mut master, &store, |s| s.pool_sizes_forgotten() == 1).await;
}

#[tokio::test]
async fn a_reload_that_lengthens_a_pools_outage_grace_asks_for_it_in_the_node_row() {
    let store = Arc::new(FakeStore::default());
    let pool = PoolSpec::defaults_with("default", vec!["default".into()], 1, vec!["php".into()]);
    let mut master = master_of(store.clone(), RunConfig::defaults_with(vec![pool.clone()]));
    let mut longer = pool;
    longer.outage_grace = 120.0;
    master.on_reread(Ok(Some(Box::new(RunConfig::defaults_with(vec![longer])))));
    assert_eq!(store.grace_wanted(), Duration::from_secs(120));
}

#[tokio::test]
async fn a_configuration_that_sets_a_queue_budget_sends_it_with_the_next_claim() {
    let store = Arc::new(FakeStore::default());
    let (mut master, pool, worker) = master_with_one_worker(store.clone()).await;
    // A reload brings the budget.
    let mut config = master.reconfig.reloading.current.clone();
    config.queue_budgets.insert("default".into(), 3);
    master.on_reread(Ok(Some(Box::new(config))));
    hello(&mut master, &worker, 1);
    master.maybe_claim(pool);
    until(&mut master, &store, |s| !s.claim_budgets().is_empty()).await;
    assert_eq!(store.claim_budgets()[0].of("default"), Some(3));
}

#[tokio::test]
async fn a_worker_that_says_hello_is_given_what_one_claim_leases_up_to_its_credit() {
    let store = Arc::new(FakeStore::default());
    let (mut master, pool, mut worker) = holding_jobs_1_and_2(store.clone()).await;
    assert_eq!(
        store.claim_limits(),
        [2],
        "one claim, for the worker's prefetch"
    );
    assert_eq!(worker.jobs_sent(), [1, 2]);
    // Both held: no credit left, no claim however often the pool is woken.
    master.claimer.want_all();
    master.maybe_claim(pool);
    settle_down(&mut master).await;
    assert_eq!(store.claim_limits(), [2]);
}

#[tokio::test]
async fn a_done_job_is_acked_and_the_next_renewal_renews_only_the_job_still_held() {
    let store = Arc::new(FakeStore::default());
    let (mut master, _, mut worker) = holding_jobs_1_and_2(store.clone()).await;
    frame(
        &mut master,
        worker.id,
        FromWorker::Started { job: 1, token: 10 },
    );
    frame(
        &mut master,
        worker.id,
        FromWorker::Done {
            job: 1,
            token: 10,
            within: false,
        },
    );
    master.settler.send_unridden(master.life.running());
    master.on_tick(Tick::Renew);
    settle_down(&mut master).await;
    assert_eq!(store.renewals(), [vec![lease(2)]]);
    let settled = settled_once(&store, |s| !s.is_empty()).await;
    assert_eq!(settled, [Settle::Ack(lease(1))]);
    assert!(
        worker
            .sent()
            .iter()
            .any(|f| matches!(f, ToWorker::Lease { .. })),
        "the worker was told how long it now holds job 2"
    );
    assert_eq!(master.totals().done, 1);
}

#[tokio::test]
async fn a_failed_renewal_is_tried_again_at_the_next_lease_check_not_a_third_of_a_lease_later() {
    let store = Arc::new(FakeStore::default());
    let (mut master, _, _worker) = holding_jobs_1_and_2(store.clone()).await;
    store.fail_renewals(1);
    master.on_tick(Tick::Renew);
    until_master(&mut master, |m| {
        m.leases.renewal() == super::leases::Renewal::Failed
    })
    .await;
    master.on_tick(Tick::LeaseCheck);
    until_master(&mut master, |m| {
        m.leases.renewal() == super::leases::Renewal::Idle
    })
    .await;
    assert_eq!(store.renewals().len(), 2, "tried again at the lease check");
    // Renewed: the next lease check asks nothing more.
    master.on_tick(Tick::LeaseCheck);
    settle_down(&mut master).await;
    assert_eq!(store.renewals().len(), 2);
}

#[tokio::test]
async fn a_renewal_lost_to_the_database_makes_status_say_so_with_exit_5_until_one_is_answered() {
    let store = Arc::new(FakeStore::default());
    let (mut master, _, _worker) = holding_jobs_1_and_2(store.clone()).await;
    assert_eq!(master.status(false).exit_code, 0);
    store.fail_renewals(1);
    master.on_tick(Tick::Renew);
    until_master(&mut master, |m| {
        m.leases.renewal() == super::leases::Renewal::Failed
    })
    .await;
    let status = master.status(false);
    assert_eq!(
        (status.health, status.exit_code),
        (crate::rules::health::Health::Degraded, 5)
    );
    assert!(
        status.problems[0].starts_with("database unreachable for 0 s: "),
        "{:?}",
        status.problems
    );
    assert!(status.database_unreachable_secs.is_some());
    // The next renewal is answered: serving again, and nothing left to say.
    master.on_tick(Tick::LeaseCheck);
    until_master(&mut master, |m| {
        m.leases.renewal() == super::leases::Renewal::Idle
    })
    .await;
    let status = master.status(false);
    assert_eq!((status.exit_code, status.problems.len()), (0, 0));
    assert_eq!(status.database_unreachable_secs, None);
}

#[tokio::test]
async fn the_status_answer_reads_the_progress_of_the_jobs_its_workers_run_and_the_workflows() {
    let store = Arc::new(FakeStore::default());
    let report = |job, percent| drover_broker::JobProgress {
        job,
        percent,
        note: Some("parsed 4,000 rows".into()),
        reported_ago: Duration::from_millis(750),
    };
    // Job 2 is only prefetched: its (earlier attempt's) report is not read.
    store.progress_reported(vec![report(1, 41), report(2, 90)]);
    store.workflows_counted(drover_broker::WorkflowCounts {
        pending: 2,
        running: 14,
        nodes_waiting_for_signal: 3,
        nodes_waiting_for_time: 5,
        failed_last_hour: 1,
    });
    let (mut master, _, worker) = holding_jobs_1_and_2(store.clone()).await;
    frame(
        &mut master,
        worker.id,
        FromWorker::Started { job: 1, token: 10 },
    );
    let (reply, answer) = tokio::sync::oneshot::channel();
    master.answer_status(reply);
    let answer: crate::status_document::Status =
        serde_json::from_value(answer.await.unwrap()).unwrap();
    assert_eq!(store.progress_asked(), [vec![1]]);
    assert_eq!(
        serde_json::to_value(&answer.progress).unwrap(),
        serde_json::json!({"1": {"percent": 41, "note": "parsed 4,000 rows", "reported_secs_ago": 0.75}})
    );
    assert_eq!(
        serde_json::to_value(&answer.workflows).unwrap(),
        serde_json::json!({"pending": 2, "running": 14, "nodes_waiting_for_signal": 3,
                           "nodes_waiting_for_time": 5, "failed_last_hour": 1})
    );
    assert!(answer.text().contains("  41% parsed 4,000 rows\n"));
}

#[tokio::test]
async fn a_worker_that_dies_has_its_running_job_taken_back_charged_and_its_prefetched_one_uncharged(
) {
    let store = Arc::new(FakeStore::default());
    let (mut master, _, worker) = holding_jobs_1_and_2(store.clone()).await;
    frame(
        &mut master,
        worker.id,
        FromWorker::Started { job: 1, token: 10 },
    );
    let settled = exit_and_settle(&mut master, &worker, &store, 2).await;
    assert!(
        settled.contains(&Settle::Release {
            lease: lease(2),
            delay: Duration::ZERO,
            charged: false,
        }),
        "the prefetched job goes back uncharged: {settled:?}"
    );
    assert!(
        settled
            .iter()
            .any(|s| matches!(s, Settle::TakeBack { lease: l, .. } if *l == lease(1))),
        "the running job is taken back, its attempt charged: {settled:?}"
    );
}

fn stop_request(job: i64, token: i64, mode: &str, outcome: &str) -> drover_broker::StopRequest {
    drover_broker::StopRequest {
        job,
        token,
        mode: mode.into(),
        outcome: outcome.into(),
        by: "#4 ops@example.com".into(),
    }
}

#[tokio::test]
async fn a_stop_request_kills_exactly_the_worker_running_that_attempt_and_settles_the_job_as_asked()
{
    let store = Arc::new(FakeStore::default());
    let (mut master, _, mut worker) = holding_jobs_1_and_2(store.clone()).await;
    // Job 2 is only prefetched, and a request names another attempt of job 1: nothing is done.
    store.request_stop(stop_request(2, 20, "kill", "fail"));
    store.request_stop(stop_request(1, 11, "kill", "fail"));
    frame(
        &mut master,
        worker.id,
        FromWorker::Started { job: 1, token: 10 },
    );
    master.handle(super::Event::ConsoleAsked);
    settle_down(&mut master).await;
    assert!(worker.signalled().is_empty());
    assert!(store.stops_carried_out().is_empty());
    // The attempt it runs: its worker is killed, the request marked carried out.
    store.request_stop(stop_request(1, 10, "kill", "fail"));
    master.handle(super::Event::ConsoleAsked);
    settle_down(&mut master).await;
    assert_eq!(worker.signalled(), vec!["kill"]);
    assert_eq!(store.stops_carried_out(), vec![1]);
    let settled = exit_and_settle(&mut master, &worker, &store, 2).await;
    assert!(
        settled.iter().any(|s| matches!(s, Settle::Fail { lease: l, error } if *l == lease(1) && error.contains("stopped by #4 ops@example.com"))),
        "the stopped job is failed as asked: {settled:?}"
    );
    assert!(
        settled.contains(&Settle::Release {
            lease: lease(2),
            delay: Duration::ZERO,
            charged: false,
        }),
        "the prefetched job goes back uncharged: {settled:?}"
    );
}

#[tokio::test]
async fn a_pool_size_set_from_the_console_scales_the_pool_and_says_so_and_an_unknown_pool_is_refused(
) {
    let store = Arc::new(FakeStore::default());
    let (mut master, pool, _worker) = master_with_one_worker(store.clone()).await;
    for (name, processes) in [("default", 3), ("nope", 1)] {
        store.set_pool_size(drover_broker::PoolSize {
            pool: name.into(),
            processes,
            by: "#4 ops@example.com".into(),
        });
    }
    master.handle(super::Event::ConsoleAsked);
    settle_down(&mut master).await;
    assert_eq!(master.pools[pool].pool().target(), 3);
    let outcomes = store.pool_size_outcomes();
    assert_eq!(
        outcomes[0],
        ("default".to_string(), "scaled to 3".to_string())
    );
    assert!(
        outcomes[1]
            .1
            .starts_with("not scaled: this master has no pool named \"nope\""),
        "{outcomes:?}"
    );
}

#[tokio::test]
async fn an_ungrouped_jobs_ack_rides_with_the_next_claim_and_a_grouped_jobs_goes_to_the_settler() {
    let store = Arc::new(FakeStore::default());
    let pool = PoolSpec::defaults_with("default", vec!["default".into()], 1, vec!["php".into()]);
    let config = MasterConfig {
        ack_ride_wait: Duration::from_secs(60),
        ..MasterConfig::default()
    };
    let mut master = master_configured(store.clone(), RunConfig::defaults_with(vec![pool]), config);
    master.maybe_read_queue_pauses(tokio::time::Instant::now());
    settle_down(&mut master).await;
    let id = master.pools.ids().next().unwrap();
    let worker = stand_ins(&mut master, id).remove(0);
    let grouped = LeasedJob {
        grouped: true,
        ..job(2)
    };
    store.will_lease(vec![job(1), grouped]);
    hello(&mut master, &worker, 2);
    master.maybe_claim(id);
    settle_down(&mut master).await;
    for n in [1, 2] {
        frame(
            &mut master,
            worker.id,
            FromWorker::Started {
                job: n,
                token: n * 10,
            },
        );
        frame(
            &mut master,
            worker.id,
            FromWorker::Done {
                job: n,
                token: n * 10,
                within: false,
            },
        );
    }
    // The grouped job's ack moves its group on, which a claim riding with it could not see.
    let settled = settled_once(&store, |s| !s.is_empty()).await;
    assert_eq!(settled, [Settle::Ack(lease(2))]);
    // The ungrouped one waits (up to its minute here) for the claim its credit asked for.
    master.maybe_claim(id);
    settle_down(&mut master).await;
    assert_eq!(store.ridden(), [lease(1)]);
    assert_eq!(store.claim_limits(), [2, 2]);
}

#[tokio::test]
async fn a_reload_that_moves_a_pool_to_another_queue_replaces_its_worker_and_claims_from_the_new_queue(
) {
    let store = Arc::new(FakeStore::default());
    let (mut master, pool, mut old) = master_with_one_worker(store.clone()).await;
    hello(&mut master, &old, 1);
    master.maybe_claim(pool);
    settle_down(&mut master).await;
    assert_eq!(store.claim_queues(), [vec!["default".to_string()]]);

    let moved = PoolSpec::defaults_with("default", vec!["mail".into()], 1, vec!["php".into()]);
    master.on_reread(Ok(Some(Box::new(RunConfig::defaults_with(vec![moved])))));
    // The rolling replacement steps on the loop's timeout tick.
    master.on_tick(Tick::Timeouts);
    let mut new = master.pools[pool].take_stand_ins();
    assert_eq!(new.len(), 1, "one new worker, from the new configuration");
    let new = new.remove(0);
    assert!(
        !old.sent().contains(&ToWorker::Stop),
        "the old worker serves until its replacement is ready"
    );
    hello(&mut master, &new, 1);
    assert!(
        old.sent().contains(&ToWorker::Stop),
        "the old worker is told to stop once the new one said hello"
    );
    master.maybe_claim(pool);
    settle_down(&mut master).await;
    assert_eq!(
        store.claim_queues().last(),
        Some(&vec!["mail".to_string()]),
        "the pool claims from its new queue"
    );
    assert_eq!(
        store.claim_limits(),
        [1, 1],
        "the new worker's credit alone"
    );
}

#[tokio::test]
async fn a_reload_that_adds_a_pool_and_drops_another_starts_the_new_one_and_lets_the_old_finish_its_job(
) {
    let store = Arc::new(FakeStore::default());
    let (mut master, old_pool, mut old) = master_with_one_worker(store.clone()).await;
    // Prefetch 2, one job leased: the old worker has credit left for another.
    store.will_lease(vec![job(1)]);
    hello(&mut master, &old, 2);
    master.maybe_claim(old_pool);
    settle_down(&mut master).await;
    assert_eq!(store.claim_limits(), [2]);
    frame(
        &mut master,
        old.id,
        FromWorker::Started { job: 1, token: 10 },
    );

    let mail = PoolSpec::defaults_with("mail", vec!["mail".into()], 1, vec!["php".into()]);
    master.on_reread(Ok(Some(Box::new(RunConfig::defaults_with(vec![mail])))));
    let new_pool = master
        .pools
        .named("mail")
        .expect("the reload built the new pool");
    let mut started = master.pools[new_pool].take_stand_ins();
    assert_eq!(started.len(), 1, "the new pool's one worker started");
    let new = started.remove(0);
    assert!(master.pools[old_pool].retired);
    // `stop`: finish the running job, start no other, exit (docs/protocol.md); no signal.
    let told = old.sent();
    assert!(told.contains(&ToWorker::Stop), "{told:?}");
    assert!(
        old.signalled().is_empty(),
        "the retired pool's worker is not signalled"
    );

    // The retired pool claims nothing more, though its worker had credit; the new one claims
    // from its queue once its worker said hello.
    master.claimer.want_all();
    master.maybe_claim(old_pool);
    settle_down(&mut master).await;
    assert_eq!(store.claim_queues(), [vec!["default".to_string()]]);
    hello(&mut master, &new, 1);
    master.maybe_claim(new_pool);
    settle_down(&mut master).await;
    assert_eq!(
        store.claim_queues(),
        [vec!["default".to_string()], vec!["mail".to_string()]]
    );

    // The job the old worker was running is acked when it is done, as any other.
    frame(
        &mut master,
        old.id,
        FromWorker::Done {
            job: 1,
            token: 10,
            within: false,
        },
    );
    let settled = settled_once(&store, |s| !s.is_empty()).await;
    assert_eq!(settled, [Settle::Ack(lease(1))]);
    assert_eq!(master.totals().done, 1);
}

/// A `balance: auto` pool `name` over queues a and b: one to four workers in all, one each at
/// least, a step of one per count.
fn autoscaled(name: &str) -> PoolSpec {
    let mut pool =
        PoolSpec::defaults_with(name, vec!["a".into(), "b".into()], 1, vec!["php".into()]);
    pool.balance = crate::config::Balance::Auto;
    pool.min_processes = 1;
    pool.max_processes = Some(4);
    pool.balance_max_shift = 1;
    pool
}

/// The sizes of [`autoscaled`] pool `pool`'s members, queue a's and queue b's.
fn targets(master: &Master, pool: &str) -> (usize, usize) {
    (
        target(master, &format!("{pool}:a")),
        target(master, &format!("{pool}:b")),
    )
}

fn target(master: &Master, pool: &str) -> usize {
    master.pools[master.pools.named(pool).unwrap()]
        .pool()
        .target()
}

/// A master running [`autoscaled`] pool `p`, each member's one worker started, and 500 jobs
/// waiting in queue a.
fn autoscaling_master_with_a_backlog_on_a(store: Arc<FakeStore>) -> Master {
    let mut master = master_of(
        store.clone(),
        RunConfig::defaults_with(vec![autoscaled("p")]),
    );
    for member in ["p:a", "p:b"] {
        let id = master.pools.named(member).unwrap();
        assert_eq!(
            stand_ins(&mut master, id).len(),
            1,
            "{member} starts at its minimum"
        );
    }
    store.waiting(&[("a", 500)]);
    master
}

#[tokio::test]
async fn a_backlog_on_one_queue_of_an_autoscaled_pool_grows_that_queues_workers_by_one_step() {
    let store = Arc::new(FakeStore::default());
    let mut master = autoscaling_master_with_a_backlog_on_a(store.clone());
    master.start_balancing(Instant::now());
    settle_down(&mut master).await;
    assert_eq!(
        store.backlog_counts(),
        [vec!["a".to_string(), "b".to_string()]]
    );
    assert_eq!(targets(&master, "p"), (2, 1));
    let grown = master.pools.named("p:a").unwrap();
    assert_eq!(
        master.pools[grown].take_stand_ins().len(),
        1,
        "one more worker started for the queue with the backlog"
    );
    // The cooldown (3 s by default) has not passed: no second count.
    master.start_balancing(Instant::now());
    settle_down(&mut master).await;
    assert_eq!(store.backlog_counts().len(), 1);
}

#[tokio::test]
async fn a_count_that_comes_back_after_a_reload_replaced_its_pool_scales_nothing() {
    let store = Arc::new(FakeStore::default());
    let mut master = autoscaling_master_with_a_backlog_on_a(store.clone());
    // The count is in flight when a reload replaces pool p with pool q over the same queues.
    master.start_balancing(Instant::now());
    master.on_reread(Ok(Some(Box::new(RunConfig::defaults_with(vec![
        autoscaled("q"),
    ])))));
    settle_down(&mut master).await;
    assert_eq!(store.backlog_counts().len(), 1, "p's count came back");
    assert_eq!(
        targets(&master, "q"),
        (1, 1),
        "p's count is not q's: q waits for a count of its own"
    );
    assert_eq!(targets(&master, "p"), (0, 0));
}

#[tokio::test]
async fn a_queue_a_reload_adds_to_a_paused_pool_is_paused_too() {
    let store = Arc::new(FakeStore::default());
    let simple = |queues: &[&str]| {
        let queues = queues.iter().map(|q| q.to_string()).collect::<Vec<_>>();
        let mut pool =
            PoolSpec::defaults_with("p", queues.clone(), queues.len(), vec!["php".into()]);
        pool.balance = crate::config::Balance::Simple;
        RunConfig::defaults_with(vec![pool])
    };
    let mut master = master_of(store.clone(), simple(&["a"]));
    master.maybe_read_queue_pauses(tokio::time::Instant::now());
    settle_down(&mut master).await;
    master.set_pool_paused("p", true).unwrap();

    master.on_reread(Ok(Some(Box::new(simple(&["a", "b"])))));
    let added = master.pools.named("p:b").expect("the reload added queue b");
    assert!(
        master.pools[added].paused,
        "p is paused, so is its new queue"
    );
    let mut started = master.pools[added].take_stand_ins();
    assert_eq!(started.len(), 1);
    let mut worker = started.remove(0);
    hello(&mut master, &worker, 1);
    let told = worker.sent();
    assert!(told.contains(&ToWorker::Pause), "{told:?}");
    master.claimer.want_all();
    master.maybe_claim(added);
    settle_down(&mut master).await;
    assert!(
        store.claim_queues().is_empty(),
        "{:?}",
        store.claim_queues()
    );

    // Continuing p continues the queue the reload added.
    master.set_pool_paused("p", false).unwrap();
    assert!(!master.pools[added].paused);
}

#[tokio::test]
async fn an_autoscaled_queue_that_is_paused_gets_no_workers_for_its_backlog() {
    // Paused by the operator for that member alone, or by name for every master (queue:pause).
    for by_name in [false, true] {
        let store = Arc::new(FakeStore::default());
        let mut master = autoscaling_master_with_a_backlog_on_a(store.clone());
        if by_name {
            store.pause_queues(&["a"]);
            master.maybe_read_queue_pauses(tokio::time::Instant::now());
            settle_down(&mut master).await;
            assert!(master.claimer.pauses().is_paused("a"));
        } else {
            master.set_pool_paused("p:a", true).unwrap();
        }
        master.start_balancing(Instant::now());
        settle_down(&mut master).await;
        assert_eq!(store.backlog_counts().len(), 1, "the queues were counted");
        assert_eq!(
            targets(&master, "p"),
            (1, 1),
            "a's 500 jobs wait for the pause, not for workers (by name: {by_name})"
        );
    }
}

#[tokio::test]
async fn stop_when_empty_gives_up_naming_the_pool_that_cannot_start_once_the_others_are_drained() {
    use std::os::unix::process::ExitStatusExt;
    let store = Arc::new(FakeStore::default());
    let one =
        |name: &str| PoolSpec::defaults_with(name, vec![name.to_string()], 1, vec!["php".into()]);
    let mut run = RunConfig::defaults_with(vec![one("good"), one("broken")]);
    run.restart_failures = 1;
    let config = MasterConfig {
        stop_when: super::StopWhen {
            empty: true,
            ..Default::default()
        },
        ..MasterConfig::default()
    };
    let mut master = master_configured(store.clone(), run, config);
    master.maybe_read_queue_pauses(tokio::time::Instant::now());
    settle_down(&mut master).await;
    let good = master.pools.named("good").unwrap();
    let broken = master.pools.named("broken").unwrap();
    let worker = stand_ins(&mut master, good).remove(0);
    let dying = stand_ins(&mut master, broken).remove(0);
    // The broken pool's worker dies before its hello: its circuit opens (restart_failures 1).
    master.on_worker_event(WorkerEvent::Exited {
        worker: dying.id,
        pid: dying.pid,
        status: Some(std::process::ExitStatus::from_raw(1 << 8)),
        lived: Duration::from_millis(50),
    });
    master.check_stop();
    assert_eq!(
        master.life.phase,
        super::Phase::Running,
        "the good pool is not drained yet"
    );
    // The good pool's claim finds its queue empty.
    hello(&mut master, &worker, 1);
    master.maybe_claim(good);
    settle_down(&mut master).await;
    master.check_stop();
    assert_ne!(
        master.life.phase,
        super::Phase::Running,
        "it stops instead of waiting for ever"
    );
    let why = master.life.failed.clone().expect("it stops as failed");
    assert!(why.contains("pool broken"), "{why}");
}

#[tokio::test]
async fn a_reload_that_lowers_an_autoscaled_pools_maximum_brings_it_within_at_once() {
    let store = Arc::new(FakeStore::default());
    let mut master = autoscaling_master_with_a_backlog_on_a(store.clone());
    master.start_balancing(Instant::now());
    settle_down(&mut master).await;
    assert_eq!(targets(&master, "p"), (2, 1));

    let mut lowered = autoscaled("p");
    lowered.max_processes = Some(2);
    master.on_reread(Ok(Some(Box::new(RunConfig::defaults_with(vec![lowered])))));
    assert_eq!(
        targets(&master, "p"),
        (1, 1),
        "two workers in all, each queue its minimum"
    );
}

/// `queue` is paused, the master is told and reads the pauses, and knows it is.
async fn learn_of_a_pause(master: &mut Master, store: &FakeStore, queue: &str) {
    store.pause_queues(&[queue]);
    master.on_pauses_changed();
    settle_down(master).await;
    assert!(master.claimer.pauses().is_paused(queue));
}

#[tokio::test]
async fn a_pause_learned_of_withdraws_the_queues_unstarted_jobs_and_is_confirmed_once_that_is_written(
) {
    let store = Arc::new(FakeStore::default());
    let (mut master, _, mut worker) = holding_jobs_1_and_2(store.clone()).await;
    assert_eq!(worker.jobs_sent(), [1, 2]);
    frame(
        &mut master,
        worker.id,
        FromWorker::Started { job: 1, token: 10 },
    );
    learn_of_a_pause(&mut master, &store, "default").await;
    assert!(
        store.confirmations().is_empty(),
        "not confirmed before the worker has the withdraw frame"
    );
    assert_eq!(
        worker.sent(),
        [ToWorker::Withdraw {
            queue: "default".into()
        }]
    );
    until(&mut master, &store, |s| s.confirmations() == [vec![1]]).await;
    // The worker gives back job 2, which it had not started: uncharged, and nothing of the
    // paused queue is claimed for the credit that frees.
    frame(
        &mut master,
        worker.id,
        FromWorker::Return { job: 2, token: 20 },
    );
    let settled = settled_once(&store, |s| !s.is_empty()).await;
    assert_eq!(
        settled,
        [Settle::Release {
            lease: lease(2),
            delay: Duration::ZERO,
            charged: false,
        }]
    );
    let id = master.pools.ids().next().unwrap();
    master.maybe_claim(id);
    settle_down(&mut master).await;
    assert_eq!(
        store.claim_queues(),
        [vec!["default".to_string()]],
        "only the first claim"
    );
}

#[tokio::test]
async fn a_claim_running_when_a_pause_is_learned_of_hands_that_queues_jobs_back_and_the_pause_is_confirmed_after_it(
) {
    let store = Arc::new(FakeStore::default());
    let (mut master, pool, mut worker) = master_with_one_worker(store.clone()).await;
    hello(&mut master, &worker, 2);
    let release = store.hold_the_next_claim();
    store.will_lease(vec![job(1), job(2)]);
    master.maybe_claim(pool);
    // The claim began before the pause committed; the master learns of the pause meanwhile.
    learn_of_a_pause(&mut master, &store, "default").await;
    assert!(
        store.confirmations().is_empty(),
        "the running claim may still lease the queue's jobs"
    );
    release.send(()).unwrap();
    until(&mut master, &store, |s| s.confirmations() == [vec![1]]).await;
    assert!(worker.jobs_sent().is_empty(), "nothing handed out");
    let settled = settled_once(&store, |s| s.len() == 2).await;
    for id in [1, 2] {
        assert!(
            settled.contains(&Settle::Release {
                lease: lease(id),
                delay: Duration::ZERO,
                charged: false,
            }),
            "job {id} back uncharged: {settled:?}"
        );
    }
}

#[tokio::test]
async fn a_resume_is_claimed_from_at_once_and_a_pause_for_a_while_ends_by_itself() {
    let store = Arc::new(FakeStore::default());
    let (mut master, pool, worker) = master_with_one_worker(store.clone()).await;
    hello(&mut master, &worker, 1);
    learn_of_a_pause(&mut master, &store, "default").await;
    master.maybe_claim(pool);
    settle_down(&mut master).await;
    assert!(store.claim_queues().is_empty(), "paused: no claim");

    // Resumed: the signal alone brings a claim.
    store.pause_queues(&[]);
    master.on_pauses_changed();
    until_master(&mut master, |m| !m.claimer.pauses().is_paused("default")).await;
    master.maybe_claim(pool);
    settle_down(&mut master).await;
    assert_eq!(store.claim_queues().len(), 1, "claimed at once");

    // Paused for 300 ms: no claim meanwhile, one once it is over, with no read of the table.
    store.paused_as(vec![drover_broker::PausedQueue {
        queue: "default".into(),
        left: Some(Duration::from_millis(300)),
        version: 5,
    }]);
    master.on_pauses_changed();
    until_master(&mut master, |m| m.claimer.pauses().is_paused("default")).await;
    let ends = master
        .claimer
        .pauses()
        .next_expiry()
        .expect("it ends by itself");
    master.claimer.want_all();
    master.maybe_claim(pool);
    settle_down(&mut master).await;
    assert_eq!(store.claim_queues().len(), 1);
    tokio::time::sleep_until(ends).await;
    master.on_due();
    assert!(!master.claimer.pauses().is_paused("default"));
    master.maybe_claim(pool);
    settle_down(&mut master).await;
    assert_eq!(
        store.claim_queues().len(),
        2,
        "claimed once the pause ended"
    );
}

#[tokio::test]
async fn a_second_pause_held_while_the_first_is_being_confirmed_is_confirmed_right_after_it() {
    let store = Arc::new(FakeStore::default());
    let (mut master, _, _worker) = master_with_one_worker(store.clone()).await;
    let release = store.hold_the_next_confirmation();
    store.pause_queues(&["a"]);
    master.on_pauses_changed();
    until(&mut master, &store, |s| s.confirmations() == [vec![1]]).await;
    // "b" is paused while the confirmation of "a" is being written: not written beside it.
    store.pause_queues(&["a", "b"]);
    master.on_pauses_changed();
    settle_down(&mut master).await;
    assert_eq!(store.confirmations(), [vec![1]]);
    // Once it answers, the next is written at once: the loop's own reactions only, no tick.
    release.send(()).unwrap();
    until(&mut master, &store, |s| s.confirmations().len() == 2).await;
    assert_eq!(store.confirmations(), [vec![1], vec![2, 3]]);
}

#[tokio::test]
async fn a_master_whose_row_was_registered_again_confirms_the_pauses_it_holds_anew() {
    let store = Arc::new(FakeStore::default());
    let (mut master, _, _worker) = master_with_one_worker(store.clone()).await;
    learn_of_a_pause(&mut master, &store, "default").await;
    until(&mut master, &store, |s| s.confirmations() == [vec![1]]).await;
    store.lose_the_node_row();
    master.on_reap_tick();
    until(&mut master, &store, |s| s.confirmations().len() == 2).await;
    assert_eq!(store.confirmations(), [vec![1], vec![1]]);
}

#[tokio::test]
async fn jobs_too_large_to_prefetch_beside_a_running_one_are_handed_back_once_and_not_claimed_again_until_a_worker_can_take_one(
) {
    let store = Arc::new(FakeStore::default());
    let (mut master, pool, mut worker) = master_with_one_worker(store.clone()).await;
    // Each costs more than a busy worker's socket may hold unstarted (`rules::socket_room`).
    let large = |id: i64| LeasedJob {
        payload: "x".repeat(70 * 1024),
        ..job(id)
    };
    store.will_lease(vec![large(1), large(2), large(3)]);
    hello(&mut master, &worker, 8);
    master.maybe_claim(pool);
    settle_down(&mut master).await;
    assert_eq!(worker.jobs_sent(), [1], "the idle worker takes one");
    frame(
        &mut master,
        worker.id,
        FromWorker::Started { job: 1, token: 10 },
    );
    // However often it is woken, the pool claims nothing it could not hand out.
    for _ in 0..3 {
        master.claimer.want_all();
        master.maybe_claim(pool);
        settle_down(&mut master).await;
    }
    assert_eq!(store.claim_limits(), [8]);
    let settled = settled_once(&store, |s| s.len() == 2).await;
    assert_eq!(
        settled.len(),
        2,
        "jobs 2 and 3 back, uncharged: {settled:?}"
    );
    // Job 1 done: the worker holds nothing and may take one large job.
    store.will_lease(vec![large(2)]);
    frame(
        &mut master,
        worker.id,
        FromWorker::Done {
            job: 1,
            token: 10,
            within: false,
        },
    );
    master.maybe_claim(pool);
    settle_down(&mut master).await;
    assert_eq!(store.claim_limits(), [8, 1]);
    assert_eq!(worker.jobs_sent(), [2]);
}

#[tokio::test]
async fn notes_of_room_on_concurrency_keys_run_one_pass_and_one_more_for_those_that_came_during_it()
{
    let store = Arc::new(FakeStore::default());
    let mut master = master(store.clone());
    master.handle(super::events::Event::LimitsWoken);
    master.handle(super::events::Event::LimitsWoken);
    master.handle(super::events::Event::LimitsWoken);
    until(&mut master, &store, |s| s.admissions() == 2).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    while let Ok(internal) = master.inbox.internal.try_recv() {
        master.on_internal(internal);
    }
    assert_eq!(
        store.admissions(),
        2,
        "three wake-ups: the pass they started, and one after it"
    );
}
