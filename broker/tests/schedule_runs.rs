//! The schedule's runs in `drover.schedule_runs` (docs/schedule.md): a due time is claimed once
//! across masters (onOneServer) or once per host, a run whose master is gone is lost and keeps
//! that, missed due times leave the ones a master claimed, and a task's last due time is read
//! per scope.

mod support;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use drover_broker::{Broker, BrokerConfig, RunEnd, RunScope, RunStatus, SystemClock};
use support::{db, Db};

async fn master(db: &Db) -> Broker {
    Broker::start(BrokerConfig::new(db.pg.url()), Arc::new(SystemClock))
        .await
        .unwrap()
}

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_796_000_000 + secs)
}

fn ended(status: RunStatus) -> RunEnd {
    RunEnd {
        status,
        reason: None,
        exit_code: Some(0),
        output_tail: Some("done".into()),
        ended_at: SystemTime::now(),
    }
}

#[tokio::test]
async fn a_due_time_is_claimed_once_across_masters_and_once_per_host() {
    let db = db().await;
    let (a, b) = (master(&db).await, master(&db).await);
    // onOneServer: the first claim holds, every other master's finds it taken.
    let first = a
        .claim_schedule_run("report", "report", at(0), RunScope::OneServer)
        .await
        .unwrap();
    assert!(first.is_some());
    assert_eq!(
        b.claim_schedule_run("report", "report", at(0), RunScope::OneServer)
            .await
            .unwrap(),
        None
    );
    // The next due time is a new claim, whoever takes it.
    assert!(b
        .claim_schedule_run("report", "report", at(60), RunScope::OneServer)
        .await
        .unwrap()
        .is_some());
    // Per host: both masters are on this host, so the second finds it taken too (one run per
    // host and due time, as cron on the host would run it) ...
    assert!(a
        .claim_schedule_run("prune", "prune", at(0), RunScope::ThisHost)
        .await
        .unwrap()
        .is_some());
    assert_eq!(
        b.claim_schedule_run("prune", "prune", at(0), RunScope::ThisHost)
            .await
            .unwrap(),
        None
    );
    // ... and a row of another host's does not stand in this host's way.
    let client = drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap();
    client
        .execute(
            "INSERT INTO drover.schedule_runs (task, summary, due_at, scope, host, status)
             VALUES ('prune', 'prune', $1, 'elsewhere', 'elsewhere', 'running')",
            &[&at(120)],
        )
        .await
        .unwrap();
    assert!(a
        .claim_schedule_run("prune", "prune", at(120), RunScope::ThisHost)
        .await
        .unwrap()
        .is_some());
    let run = first.unwrap();
    a.schedule_run_started(run, 4242, at(0)).await.unwrap();
    assert!(a
        .finish_schedule_run(run, &ended(RunStatus::Succeeded))
        .await
        .unwrap());
    let row = client
        .query_one(
            "SELECT status, pid, exit_code, output_tail, scope FROM drover.schedule_runs WHERE id = $1",
            &[&run],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "succeeded");
    assert_eq!(row.get::<_, Option<i32>>(1), Some(4242));
    assert_eq!(row.get::<_, Option<i32>>(2), Some(0));
    assert_eq!(row.get::<_, Option<String>>(3).as_deref(), Some("done"));
    assert_eq!(row.get::<_, String>(4), "");
}

#[tokio::test]
async fn a_run_whose_master_is_gone_is_lost_and_its_late_end_keeps_that() {
    let db = db().await;
    let (a, b) = (master(&db).await, master(&db).await);
    let run = a
        .claim_schedule_run("report", "report", at(0), RunScope::OneServer)
        .await
        .unwrap()
        .unwrap();
    // A live master's run is not lost.
    assert!(b.mark_lost_schedule_runs().await.unwrap().is_empty());
    a.deregister().await.unwrap();
    let lost = b.mark_lost_schedule_runs().await.unwrap();
    assert_eq!(lost.len(), 1);
    assert_eq!(lost[0].task, "report");
    assert_eq!(lost[0].due_at, at(0));
    // Its end, reported after all (the master was only cut off), changes nothing.
    assert!(!a
        .finish_schedule_run(run, &ended(RunStatus::Succeeded))
        .await
        .unwrap());
    let client = drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap();
    let row = client
        .query_one(
            "SELECT status, reason FROM drover.schedule_runs WHERE id = $1",
            &[&run],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "lost");
    assert!(row.get::<_, String>(1).contains("died while it ran"));
}

#[tokio::test]
async fn missed_due_times_leave_the_claimed_ones_and_the_last_due_time_is_read_per_scope() {
    let db = db().await;
    let (a, b) = (master(&db).await, master(&db).await);
    a.claim_schedule_run("report", "report", at(60), RunScope::OneServer)
        .await
        .unwrap()
        .unwrap();
    let recorded = b
        .record_missed_runs(
            "report",
            "report",
            RunScope::OneServer,
            &[at(0), at(60), at(120)],
            "no master ran the schedule then",
        )
        .await
        .unwrap();
    assert_eq!(recorded, 2, "the claimed due time keeps its run");
    let client = drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap();
    let statuses: Vec<(SystemTime, String)> = client
        .query(
            "SELECT due_at, status FROM drover.schedule_runs ORDER BY due_at",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        statuses,
        [
            (at(0), "missed".to_string()),
            (at(60), "running".to_string()),
            (at(120), "missed".to_string())
        ]
    );
    a.claim_schedule_run("prune", "prune", at(30), RunScope::ThisHost)
        .await
        .unwrap()
        .unwrap();
    let mut last = b
        .last_schedule_dues(&["report", "prune", "other"])
        .await
        .unwrap();
    last.sort_by(|x, y| x.0.cmp(&y.0));
    assert_eq!(
        last,
        [
            ("prune".to_string(), RunScope::ThisHost, at(30)),
            ("report".to_string(), RunScope::OneServer, at(120))
        ]
    );
    // Retention: runs due long ago go, never one still running.
    let deleted = b
        .trim_schedule_runs(Duration::from_secs(1), Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(deleted, 2);
    let left: i64 = client
        .query_one("SELECT count(*) FROM drover.schedule_runs", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 2, "the two running claims stay");
}
