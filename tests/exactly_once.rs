//! Exactly once for what a job writes (issue 59, docs/exactly-once.md), on both Laravels, under
//! every fault at once: workers SIGKILLed right after their job wrote its effect, a master frozen
//! past its lease, the other host cut off from the database past its lease, and PostgreSQL
//! restarted. Half the jobs complete inside their own transaction (`CompletesInTransaction`),
//! half are plain: every job's effect exists at least once, each of the first kind's exactly
//! once, and the plain kind shows the doubles the faults cause — so the test can fail.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use tokio_postgres::Client;

mod support;

use support::partition::Partition;
use support::postgres::pg_ctl;
use support::{
    count, free_port, reconnect, start_master, stop_master, Cluster, Laravel, LaravelApp,
};

/// Jobs of each kind.
const EACH: i64 = 330;
/// Lease of both masters: the frozen master and the cut host stay out for two of them.
const LEASE_SECS: u64 = 3;

/// `DB_HOST`/`DB_PORT` (and the journal's, which goes straight to the database: its records
/// must outlive the cut) for a host whose database is at 127.0.0.1:`port`.
fn host(db: &Cluster, laravel: Laravel, port: u16, journal_port: u16) -> LaravelApp {
    let port = port.to_string();
    let journal_port = journal_port.to_string();
    let mut app = LaravelApp::new_with(
        db,
        laravel,
        &[
            ("DB_HOST", "127.0.0.1"),
            ("DB_PORT", &port),
            ("FIXTURE_RECORDS_HOST", "127.0.0.1"),
            ("FIXTURE_RECORDS_PORT", &journal_port),
        ],
    );
    app.env.push(("DROVER_PROCESSES".into(), "2".into()));
    app.env
        .push(("DROVER_LEASE".into(), LEASE_SECS.to_string()));
    app
}

/// A worker that wrote its job's effect within the last 25 ms (its job keeps working 40 ms more),
/// of the jobs labelled `like`: the moment that doubles a plain job's effect if it dies.
async fn in_its_window(client: &Client, like: &str) -> Option<i32> {
    let rows = client
        .query(
            "SELECT j.pid FROM journal j WHERE j.event = 'effect' AND j.label LIKE $1 \
             AND j.at > clock_timestamp() - interval '25 milliseconds' \
             AND NOT EXISTS (SELECT 1 FROM journal e WHERE e.label = j.label AND e.event = 'end' AND e.pid = j.pid AND e.at >= j.at) \
             ORDER BY j.at DESC LIMIT 1",
            &[&like],
        )
        .await
        .ok()?;
    rows.first().map(|r| r.get(0))
}

/// Effects written per job label.
async fn effects_per_job(client: &Client, like: &str) -> BTreeMap<String, i64> {
    client
        .query(
            "SELECT label, count(*) FROM effects WHERE label LIKE $1 GROUP BY label",
            &[&like],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

/// Both masters' totals, summed: (done, completed within its own transaction).
fn totals(hosts: &[&LaravelApp]) -> (u64, u64) {
    let mut sum = (0, 0);
    for app in hosts {
        let out = app.command(&["drover:status", "--json"]).output().unwrap();
        let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        sum.0 += status["totals"]["done"].as_u64().unwrap_or(0);
        sum.1 += status["totals"]["completed_within"].as_u64().unwrap_or(0);
    }
    sum
}

async fn every_effect_exactly_once_under_killed_workers_a_frozen_master_a_cut_host_and_a_restart(
    laravel: Laravel,
) {
    let port = free_port();
    let db = Cluster::start_with(|c| c.tcp_port = Some(port)).await;
    let cable = Partition::start(port);
    let a = host(&db, laravel, port, port);
    let b = host(&db, laravel, cable.port(), port);
    let master_a = start_master(&a, 2).await;
    let master_b = start_master(&b, 2).await;
    let mut client = db.client().await;

    a.artisan(&[
        "app:eval",
        &format!(
            r#"foreach (range(1, {EACH}) as $i) {{
                 App\Jobs\EffectJob::dispatch("plain $i");
                 App\Jobs\ExactlyOnceEffectJob::dispatch("once $i");
               }}"#
        ),
    ]);

    // Workers killed in the 40 ms after their job wrote its effect, every 300 ms, each kind in
    // turn, all along; the other faults in sequence meanwhile.
    let started = Instant::now();
    let mut kills = BTreeMap::from([("plain %", 0), ("once %", 0)]);
    let mut phase = 0;
    let mut turn = 0usize;
    // Jobs not yet completed as each fault began: each fault must find jobs to hit.
    let mut left_at_fault = Vec::new();
    let mut left = -1;
    let drained = loop {
        let elapsed = started.elapsed();
        let before = phase;
        match phase {
            // The master of host A frozen for two leases: its lease guard stops its workers
            // before their leases end, and host B takes their jobs back.
            0 if elapsed > Duration::from_millis(1000) => {
                kill(Pid::from_raw(master_a.id() as i32), Signal::SIGSTOP).unwrap();
                phase = 1;
            }
            1 if elapsed > Duration::from_millis(1000 + 2000 * LEASE_SECS) => {
                kill(Pid::from_raw(master_a.id() as i32), Signal::SIGCONT).unwrap();
                phase = 2;
            }
            // Host B cut off from the database for two leases: its master stops its workers
            // before their leases end, host A takes their jobs back; then the cable is back.
            2 if elapsed > Duration::from_millis(1500 + 2000 * LEASE_SECS) => {
                cable.cut();
                phase = 3;
            }
            3 if elapsed > Duration::from_millis(1500 + 4000 * LEASE_SECS) => {
                cable.heal();
                phase = 4;
            }
            // PostgreSQL restarted under both.
            4 if elapsed > Duration::from_millis(2000 + 4000 * LEASE_SECS) => {
                drop(client);
                let data_dir = db.pg.as_ref().unwrap().data_dir().to_path_buf();
                pg_ctl(&data_dir, &["restart", "-m", "fast", "-l", "/dev/null"]);
                client = reconnect(&db).await;
                phase = 5;
            }
            _ => {}
        }
        if phase != before && phase % 2 == 1 {
            left_at_fault.push(left);
        }
        let kind = ["plain %", "once %"][turn % 2];
        turn += 1;
        if let Some(pid) = in_its_window(&client, kind).await {
            if kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok() {
                *kills.get_mut(kind).unwrap() += 1;
            }
        }
        left = match client
            .query_one("SELECT count(*) FROM drover.jobs", &[])
            .await
        {
            Ok(row) => row.get::<_, i64>(0),
            Err(_) => {
                client = reconnect(&db).await;
                -1
            }
        };
        if phase == 5 && left == 0 {
            break started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "{left} jobs left after 120 s:\n{}\n{}",
            a.log("drover.log"),
            b.log("drover.log")
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };

    let once = effects_per_job(&client, "once %").await;
    let plain = effects_per_job(&client, "plain %").await;
    let doubled_plain = plain.values().filter(|n| **n > 1).count();
    let doubled_once: Vec<_> = once.iter().filter(|(_, n)| **n > 1).collect();
    eprintln!(
        "{laravel:?}: drained in {drained:?}; jobs left as the freeze, the cut and the restart \
         began: {left_at_fault:?}; workers killed after the effect: {kills:?}; \
         plain jobs with their effect twice or more: {doubled_plain} of {EACH}; \
         jobs completed in their own transaction with it twice: {}",
        doubled_once.len()
    );
    assert!(
        left_at_fault.len() == 3 && left_at_fault.iter().all(|n| *n > 0),
        "every fault found jobs to hit: {left_at_fault:?}"
    );
    assert_eq!(
        count(
            &client,
            // drover's own failures and Laravel's (the test connects as role drover, whose
            // search path finds drover.failed_jobs first).
            "SELECT (SELECT count(*) FROM drover.failed_jobs) + (SELECT count(*) FROM public.failed_jobs)",
        )
        .await,
        0,
        "no job failed"
    );
    assert_eq!(plain.len() as i64, EACH, "every plain job's effect exists");
    assert_eq!(once.len() as i64, EACH, "every job's effect exists");
    assert!(doubled_once.is_empty(), "written twice: {doubled_once:?}");
    assert!(
        kills["once %"] > 0 && kills["plain %"] > 0,
        "workers were killed in their jobs' windows: {kills:?}"
    );
    assert!(
        doubled_plain > 0,
        "the same faults double a plain job's effect (else this test proves nothing)"
    );

    // Each job completed inside its own transaction is counted once, as completed within,
    // whether its worker said so or died after the commit (a settle that changed nothing
    // learned it from the database).
    let deadline = Instant::now() + Duration::from_secs(20);
    let (done, within) = loop {
        let (done, within) = totals(&[&a, &b]);
        if within as i64 >= EACH || Instant::now() > deadline {
            break (done, within);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(within as i64, EACH, "counted once each (done: {done})");
    let said = format!(
        "{}{}",
        a.artisan(&["drover:status"]),
        b.artisan(&["drover:status"])
    );
    assert!(
        said.contains("completed within their own transaction"),
        "{said}"
    );
    assert!(done as i64 >= 2 * EACH, "done: {done}");
    assert_eq!(
        count(&client, "SELECT count(*) FROM drover.completions").await,
        0,
        "every completion learned by its master"
    );

    stop_master(&a, master_a).await;
    stop_master(&b, master_b).await;
    drop(cable);
    db.stop().await;
}

on_every_laravel!(
    every_effect_exactly_once_under_killed_workers_a_frozen_master_a_cut_host_and_a_restart
);
