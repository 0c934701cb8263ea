//! The pool against real child processes (`sh` standing in for PHP: the supervisor only sees
//! bytes on fd 3 and exits).

use std::time::{Duration, Instant};

use drover_supervisor::{
    Control, FromWorker, Pool, PoolConfig, ProtocolError, WorkerCommand, WorkerEvent,
};
use tokio::sync::mpsc;

fn sh(script: &str) -> PoolConfig {
    let mut config = PoolConfig::new(WorkerCommand {
        program: "sh".into(),
        args: vec!["-c".into(), script.into()],
        env: vec![],
        cwd: None,
        nice: None,
    });
    config.processes = 1;
    config.max_frame_bytes = 4096;
    config
}

async fn next(rx: &mut mpsc::UnboundedReceiver<WorkerEvent>) -> WorkerEvent {
    tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("an event within 5s")
        .expect("channel open")
}

#[tokio::test]
async fn frames_arrive_in_order_and_the_exit_comes_after_the_last_one() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let script = r#"printf '{"t":"hello","v":2,"pid":1,"prefetch":2}\n{"t":"done","job":5,"token":6}\n' >&3; exit 7"#;
    let mut pool = Pool::new(sh(script), tx).unwrap();
    pool.start().unwrap();
    assert!(matches!(
        next(&mut rx).await,
        WorkerEvent::Frame {
            frame: FromWorker::Hello { prefetch: 2, .. },
            ..
        }
    ));
    assert!(matches!(
        next(&mut rx).await,
        WorkerEvent::Frame {
            frame: FromWorker::Done {
                job: 5,
                token: 6,
                within: false
            },
            ..
        }
    ));
    match next(&mut rx).await {
        WorkerEvent::Exited { status, .. } => assert_eq!(status.unwrap().code(), Some(7)),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn the_worker_gets_its_env_and_can_read_frames_from_the_master() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    // Echo the master's first frame back as the error of a fail frame.
    let script = r#"read -r line <&3; printf '{"t":"fail","job":1,"token":%s,"error":"%s"}\n' "$DROVER_WORKER_ID" "$(printf %s "$line" | tr -d '"')" >&3"#;
    let mut pool = Pool::new(sh(script), tx).unwrap();
    pool.start().unwrap();
    let id = pool.ids().next().unwrap();
    assert!(pool.send(id, drover_supervisor::ToWorker::Pause));
    match next(&mut rx).await {
        WorkerEvent::Frame {
            frame: FromWorker::Fail { token, error, .. },
            ..
        } => {
            assert_eq!(token, id.0 as i64);
            assert_eq!(error, "{t:pause}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_oversized_frame_is_refused_without_reading_it_all() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut pool = Pool::new(
        sh("head -c 100000 /dev/zero | tr '\\0' x >&3; sleep 30"),
        tx,
    )
    .unwrap();
    pool.start().unwrap();
    match next(&mut rx).await {
        WorkerEvent::BadInput { problem, worker } => {
            assert_eq!(problem, ProtocolError::Oversized { limit: 4096 });
            pool.control(worker, Control::Kill);
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(next(&mut rx).await, WorkerEvent::Exited { .. }));
}

#[tokio::test]
async fn a_grandchild_holding_fd3_does_not_delay_the_exit_event() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut pool = Pool::new(sh(r#"printf '{"t":"hello","v":2,"pid":1,"prefetch":1}\n' >&3; sleep 20 >/dev/null 2>&1 & exit 0"#), tx).unwrap();
    pool.start().unwrap();
    assert!(matches!(next(&mut rx).await, WorkerEvent::Frame { .. }));
    let t = Instant::now();
    assert!(matches!(next(&mut rx).await, WorkerEvent::Exited { .. }));
    // Far sooner than the grandchild's 20 s, even on a loaded machine.
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}

#[tokio::test]
async fn a_killed_worker_is_restarted_after_its_backoff_and_not_once_the_pool_closes() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut pool = Pool::new(sh("exec sleep 30"), tx).unwrap();
    pool.start().unwrap();
    let first = pool.ids().next().unwrap();
    pool.control(first, Control::Kill);
    let WorkerEvent::Exited { worker, status, .. } = next(&mut rx).await else {
        panic!()
    };
    assert_eq!(worker, first);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.unwrap().signal(), Some(9));
    let verdict = pool.on_exit(worker, status, false, false).unwrap();
    assert!(!verdict.planned, "a kill it did not ask for is a crash");
    assert_eq!(verdict.restart_in, Some(Duration::from_millis(100)));
    // The pool keeps the restart's time; whoever drives it starts it once it is due.
    let due = pool.next_restart().expect("a restart waits");
    pool.start_due_restarts(Instant::now());
    assert_eq!(pool.ids().count(), 0, "not before its backoff");
    tokio::time::sleep(due.saturating_duration_since(Instant::now())).await;
    pool.start_due_restarts(Instant::now());
    assert_eq!(pool.next_restart(), None);
    let second = pool.ids().next().expect("restarted");
    assert_ne!(second, first, "a new id, never reused");
    pool.shut_down();
    pool.control(second, Control::Terminate);
    let WorkerEvent::Exited { worker, .. } = next(&mut rx).await else {
        panic!()
    };
    let verdict = pool.on_exit(worker, None, false, false).unwrap();
    assert_eq!(verdict.restart_in, None, "a closing pool restarts nothing");
    assert_eq!(pool.live(), 0);
}

/// Feeds the pool its own events and its clock (its ticks and due restarts, every 20 ms, as the
/// master's loop does) until `until` says stop, after an event (`Some`) or a turn of the clock
/// (`None`); `ready` workers get `mark_ready`.
async fn drive(
    pool: &mut Pool,
    rx: &mut mpsc::UnboundedReceiver<WorkerEvent>,
    limit: Duration,
    mut until: impl FnMut(&Pool, Option<&WorkerEvent>) -> bool,
) {
    let deadline = Instant::now() + limit;
    loop {
        let event = tokio::select! {
            e = rx.recv() => e.expect("channel open"),
            _ = tokio::time::sleep(Duration::from_millis(20)) => {
                pool.tick(Instant::now());
                pool.start_due_restarts(Instant::now());
                if until(pool, None) {
                    return;
                }
                assert!(Instant::now() < deadline, "timed out driving the pool");
                continue;
            }
        };
        match &event {
            WorkerEvent::Frame {
                worker,
                frame: FromWorker::Hello { .. },
            } => {
                pool.mark_ready(*worker, Instant::now());
            }
            WorkerEvent::Exited { worker, .. } => {
                pool.on_exit(*worker, None, false, false);
            }
            _ => {}
        }
        if until(pool, Some(&event)) {
            return;
        }
    }
}

#[tokio::test]
async fn a_reload_brings_its_boot_timeout_and_restart_rules_to_a_running_pool() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let hello =
        r#"printf '{"t":"hello","v":2,"pid":%d,"prefetch":1}\n' $$ >&3; read line <&3; exit 0"#;
    let mut pool = Pool::new(sh(hello), tx).unwrap();
    pool.start().unwrap();
    drive(&mut pool, &mut rx, Duration::from_secs(10), |pool, _| {
        pool.serving() == 1
    })
    .await;
    // The new release never says hello; the new configuration gives it 200 ms, not the 60 s the
    // pool started with, and opens the circuit at its first failed start.
    let mut new = sh("exec sleep 30");
    new.boot_timeout = Duration::from_millis(200);
    new.circuit.failures = 1;
    new.circuit.open_for = Duration::from_secs(60);
    pool.reload(new).unwrap();
    drive(&mut pool, &mut rx, Duration::from_secs(10), |pool, _| {
        matches!(pool.circuit(), drover_supervisor::CircuitState::Open { .. })
    })
    .await;
    assert_eq!(pool.failures_in_a_row(), 1);
    assert_eq!(pool.serving(), 1, "the old worker keeps serving");
}

#[tokio::test]
async fn a_pool_started_while_the_master_runs_retries_a_start_that_fails() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut config = sh("true");
    config.command.program = "/nonexistent/drover-test-worker".into();
    config.circuit.failures = 2;
    config.circuit.open_for = Duration::from_secs(60);
    let mut pool = Pool::new(config, tx).unwrap();
    // The first start fails at once; the retry after the backoff fails too, and opens the circuit.
    pool.start_retrying();
    assert_eq!(pool.failures_in_a_row(), 1);
    drive(&mut pool, &mut rx, Duration::from_secs(10), |pool, _| {
        matches!(pool.circuit(), drover_supervisor::CircuitState::Open { .. })
    })
    .await;
    assert_eq!(pool.failures_in_a_row(), 2);
    assert_eq!(pool.live(), 0);
}

#[tokio::test]
async fn a_worker_that_never_says_hello_is_killed_at_the_boot_timeout_and_the_circuit_opens() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut config = sh("exec sleep 30");
    config.boot_timeout = Duration::from_millis(200);
    config.circuit.failures = 2;
    config.circuit.open_for = Duration::from_secs(60);
    let mut pool = Pool::new(config, tx).unwrap();
    pool.start().unwrap();
    let mut exits = 0;
    drive(&mut pool, &mut rx, Duration::from_secs(10), |pool, e| {
        if matches!(e, Some(WorkerEvent::Exited { .. })) {
            exits += 1;
        }
        matches!(pool.circuit(), drover_supervisor::CircuitState::Open { .. })
    })
    .await;
    assert_eq!(exits, 2);
    assert_eq!(pool.live(), 0, "no worker starts while the circuit is open");
    assert_eq!(pool.failures_in_a_row(), 2);
}

#[tokio::test]
async fn a_reload_replaces_workers_one_at_a_time_keeping_all_but_one_serving() {
    let (tx, mut rx) = mpsc::unbounded_channel();
    // Says hello, then waits for `stop` on fd 3 and exits.
    let script =
        r#"printf '{"t":"hello","v":2,"pid":%d,"prefetch":1}\n' $$ >&3; read line <&3; exit 0"#;
    let mut config = sh(script);
    config.processes = 3;
    let mut pool = Pool::new(config.clone(), tx).unwrap();
    pool.start().unwrap();
    drive(&mut pool, &mut rx, Duration::from_secs(10), |pool, _| {
        pool.serving() == 3
    })
    .await;
    let old: Vec<_> = pool.ids().collect();
    pool.reload(config.clone()).unwrap();
    let mut lowest = usize::MAX;
    drive(&mut pool, &mut rx, Duration::from_secs(20), |pool, _| {
        lowest = lowest.min(pool.serving());
        let workers = pool.workers();
        workers.len() == 3 && workers.iter().all(|w| w.generation == 1 && w.ready)
    })
    .await;
    assert!(lowest >= 2, "serving fell to {lowest}");
    assert!(pool.ids().all(|id| !old.contains(&id)));
    assert_eq!(
        pool.failures_in_a_row(),
        0,
        "retired workers are planned exits"
    );
}

#[tokio::test]
async fn a_frame_sent_to_be_written_is_told_once_it_is_in_the_workers_socket_before_the_worker_reads_it(
) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let out = std::env::temp_dir().join(format!("drover-written-{}", std::process::id()));
    // Says hello, reads nothing for a second, then writes down the first frame it reads.
    let script = format!(
        r#"printf '{{"t":"hello","v":2,"pid":%d,"prefetch":1}}\n' $$ >&3; sleep 1; read line <&3; printf '%s' "$line" > {}; exit 0"#,
        out.display()
    );
    let mut pool = Pool::new(sh(&script), tx).unwrap();
    pool.start().unwrap();
    drive(&mut pool, &mut rx, Duration::from_secs(10), |pool, _| {
        pool.serving() == 1
    })
    .await;
    let id = pool.ids().next().unwrap();
    let frame = drover_supervisor::ToWorker::Withdraw {
        queue: "emails".into(),
    };
    let asked = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), pool.send_written(id, frame))
        .await
        .expect("told within 5 s")
        .expect("written, not dropped");
    assert!(
        asked.elapsed() < Duration::from_millis(900) && !out.exists(),
        "told as it was written, before the worker read it"
    );
    drive(&mut pool, &mut rx, Duration::from_secs(10), |_, e| {
        matches!(e, Some(WorkerEvent::Exited { .. }))
    })
    .await;
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        r#"{"t":"withdraw","queue":"emails"}"#
    );
    let _ = std::fs::remove_file(&out);
    // A worker that is gone: nothing is written, and the waiter hears so at once.
    assert!(pool
        .send_written(id, drover_supervisor::ToWorker::Stop)
        .await
        .is_err());
}
