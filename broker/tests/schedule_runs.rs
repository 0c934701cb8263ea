//! The schedule's runs in `drover.schedule_runs` (docs/schedule.md): a due time is claimed once
//! across masters (onOneServer) or once per host, a run whose master is gone is lost and keeps
//! that, missed due times leave the ones a master claimed, and a task's last due time is read
//! per scope.

mod support;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use drover_broker::{
    Broker, BrokerConfig, RunEnd, RunScope, RunStatus, ScheduleClaim, SystemClock,
};
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
    let ScheduleClaim::Run(run) = first else {
        panic!("{first:?}")
    };
    assert_eq!(
        b.claim_schedule_run("report", "report", at(0), RunScope::OneServer)
            .await
            .unwrap(),
        ScheduleClaim::Taken
    );
    // The next due time is a new claim, whoever takes it.
    assert!(b
        .claim_schedule_run("report", "report", at(60), RunScope::OneServer)
        .await
        .unwrap()
        .run()
        .is_some());
    // Per host: both masters are on this host, so the second finds it taken too (one run per
    // host and due time, as cron on the host would run it) ...
    assert!(a
        .claim_schedule_run("prune", "prune", at(0), RunScope::ThisHost)
        .await
        .unwrap()
        .run()
        .is_some());
    assert_eq!(
        b.claim_schedule_run("prune", "prune", at(0), RunScope::ThisHost)
            .await
            .unwrap(),
        ScheduleClaim::Taken
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
        .run()
        .is_some());
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
        .run()
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
        .run()
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
        .run()
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

#[tokio::test]
async fn a_paused_task_is_skipped_once_per_due_time_a_run_asked_for_now_is_taken_once_and_results_say_so(
) {
    let db = db().await;
    let (a, b) = (master(&db).await, master(&db).await);
    let client = drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap();
    client
        .execute(
            "INSERT INTO drover.schedule_pauses (task, summary, paused_by) VALUES ('report', 'report', 'ops')",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        a.claim_schedule_run("report", "report", at(0), RunScope::OneServer)
            .await
            .unwrap(),
        ScheduleClaim::Paused
    );
    assert_eq!(
        b.claim_schedule_run("report", "report", at(0), RunScope::OneServer)
            .await
            .unwrap(),
        ScheduleClaim::Taken,
        "the paused due time is recorded once"
    );
    let reason: String = client
        .query_one(
            "SELECT status || ': ' || reason FROM drover.schedule_runs WHERE task = 'report'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(reason.starts_with("skipped: paused since "), "{reason}");
    assert!(reason.ends_with(" by ops"), "{reason}");
    // Run now: one row asked for, taken by one master only, and only by one that has the task.
    client
        .execute(
            "INSERT INTO drover.schedule_runs (task, summary, due_at, scope, host, status, asked_by)
             VALUES ('report', 'report', $1, '', 'web-1', 'requested', 'ops')",
            &[&at(30)],
        )
        .await
        .unwrap();
    assert_eq!(
        a.take_requested_schedule_run(&["prune"]).await.unwrap(),
        None
    );
    let taken = b
        .take_requested_schedule_run(&["prune", "report"])
        .await
        .unwrap()
        .expect("taken");
    assert_eq!((taken.1.as_str(), taken.2), ("report", at(30)));
    assert_eq!(
        a.take_requested_schedule_run(&["report"]).await.unwrap(),
        None
    );
    b.finish_schedule_run(taken.0, &ended(RunStatus::Succeeded))
        .await
        .unwrap();
    let claim = a
        .claim_schedule_run("prune", "prune", at(0), RunScope::ThisHost)
        .await
        .unwrap()
        .run()
        .unwrap();
    a.finish_schedule_run(claim, &ended(RunStatus::Failed))
        .await
        .unwrap();
    let results = a
        .schedule_results(&["report", "prune", "never"])
        .await
        .unwrap();
    let report = &results[0];
    assert_eq!(report.latest.as_ref().unwrap().status, "succeeded");
    assert_eq!(report.latest.as_ref().unwrap().due_at, at(30));
    assert_eq!(report.last_success, Some(at(30)));
    assert_eq!(report.failed_in_a_row, 0);
    let prune = &results[1];
    assert_eq!(prune.latest.as_ref().unwrap().status, "failed");
    assert_eq!(prune.last_success, None);
    assert_eq!(prune.failed_in_a_row, 1);
    assert_eq!(results[2].latest, None);
}

#[tokio::test]
async fn a_tasks_alert_is_taken_once_per_cooldown_across_masters() {
    let db = db().await;
    let (a, b) = (master(&db).await, master(&db).await);
    let cooldown = Duration::from_secs(300);
    assert!(a.claim_schedule_alert("report", cooldown).await.unwrap());
    assert!(!b.claim_schedule_alert("report", cooldown).await.unwrap());
    assert!(!a.claim_schedule_alert("report", cooldown).await.unwrap());
    assert!(
        b.claim_schedule_alert("prune", cooldown).await.unwrap(),
        "each task has its own"
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert!(
        b.claim_schedule_alert("report", Duration::from_secs(1))
            .await
            .unwrap(),
        "after the cooldown, the next alert"
    );
}
