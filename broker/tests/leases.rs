//! Lease rules against a real PostgreSQL, with a manual clock instead of sleeps (every statement
//! takes the manual clock's time instead of the database's `now()`), and with the production
//! clock, which leaves time to the database.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

mod support;

use drover_broker::{
    Broker, BrokerConfig, BrokerError, Clock, Lease, ManualClock, Settle, SystemClock,
};
use support::{db, queues, Db};

/// The lease of these tests. The manual clock moves past it without waiting, so it can be long;
/// and it must be, because each call's client-side deadline is half the lease in real time, and a
/// loaded CI machine (2 cores, every suite at once) has stalled a call for more than a second.
const LEASE: Duration = Duration::from_secs(20);

async fn broker(db: &Db, clock: Arc<dyn Clock>) -> Broker {
    let mut config = BrokerConfig::new(db.pg.url());
    config.lease = LEASE;
    Broker::start(config, clock).await.unwrap()
}

/// Enqueues `n` jobs available as of the test clock's "now" (the database's for the production
/// clock).
async fn enqueue(
    db: &Db,
    clock: &dyn Clock,
    queue: &str,
    n: i64,
    max_attempts: Option<i32>,
) -> Vec<i64> {
    let client = drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap();
    client
        .query(
            "INSERT INTO drover.jobs (queue, payload, max_attempts, available_at)
             SELECT $1, 'p' || g, $3, coalesce($4::timestamptz, now()) FROM generate_series(1, $2::bigint) g RETURNING id",
            &[&queue, &n, &max_attempts, &clock.now()],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

#[tokio::test]
async fn an_expired_lease_is_taken_back_and_a_settle_with_its_stale_token_changes_nothing() {
    let db = db().await;
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let a = broker(&db, clock.clone()).await;
    let b = broker(&db, clock.clone()).await;
    enqueue(&db, clock.as_ref(), "default", 1, None).await;

    let first = a.claim(&queues(&["default"]), 10).await.unwrap();
    assert_eq!(first.len(), 1);
    let old = Lease {
        id: first[0].id,
        token: first[0].token,
    };
    assert!(
        b.claim(&queues(&["default"]), 10).await.unwrap().is_empty(),
        "a held job is not claimable"
    );

    // Not expired yet: nothing to take back.
    clock.advance(LEASE - Duration::from_millis(100));
    assert_eq!(b.reap_expired().await.unwrap().released, 0);
    // Past the lease: taken back, attempt still charged.
    clock.advance(Duration::from_millis(200));
    assert_eq!(b.reap_expired().await.unwrap().released, 1);
    let second = b.claim(&queues(&["default"]), 10).await.unwrap();
    assert_eq!(second.len(), 1);
    assert!(second[0].token > old.token, "fencing tokens only grow");
    assert_eq!(second[0].attempts, 2);

    // The first holder comes back late: its renew and settles match nothing.
    assert_eq!(
        a.renew(&[old]).await.unwrap(),
        drover_broker::Renewed::default()
    );
    let outcome = a.settle(&[Settle::Ack(old)]).await.unwrap();
    assert_eq!(outcome.acked, 0);
    assert_eq!(outcome.stale, vec![old.id]);
    let outcome = a
        .settle(&[
            Settle::Fail {
                lease: old,
                error: "late".into(),
            },
            Settle::Release {
                lease: old,
                delay: Duration::ZERO,
                charged: true,
            },
        ])
        .await
        .unwrap();
    assert_eq!(
        (outcome.failed, outcome.released, outcome.stale.len()),
        (0, 0, 2)
    );

    // The current holder settles fine.
    let current = Lease {
        id: second[0].id,
        token: second[0].token,
    };
    assert_eq!(b.settle(&[Settle::Ack(current)]).await.unwrap().acked, 1);
}

#[tokio::test]
async fn acks_riding_with_a_claim_delete_their_jobs_in_its_first_statement_and_a_stale_one_changes_nothing(
) {
    let db = db().await;
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let b = broker(&db, clock.clone()).await;
    enqueue(&db, clock.as_ref(), "default", 3, None).await;
    enqueue(&db, clock.as_ref(), "low", 1, None).await;
    let held = b.claim(&queues(&["default"]), 2).await.unwrap();
    assert_eq!(held.len(), 2);
    assert!(held.iter().all(|j| !j.grouped));
    let done = Lease {
        id: held[0].id,
        token: held[0].token,
    };
    let stale = Lease {
        id: held[1].id,
        token: held[1].token + 1000,
    };

    let claimed = b
        .claim_with_acks(&queues(&["default", "low"]), 5, &[done, stale])
        .await
        .unwrap();
    assert_eq!(
        claimed.stale_acks,
        vec![stale.id],
        "the stale ack changed nothing"
    );
    assert_eq!(
        claimed
            .jobs
            .iter()
            .map(|j| j.queue.as_str())
            .collect::<Vec<_>>(),
        ["default", "low"],
        "both queues were claimed from, as without acks"
    );
    let client = drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap();
    let left: Vec<i64> = client
        .query("SELECT id FROM drover.jobs ORDER BY id", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(!left.contains(&done.id), "the acked job is gone");
    assert!(
        left.contains(&held[1].id),
        "the job of the stale ack is still held"
    );

    // With nothing left to claim, the acks are still written.
    let last = Lease {
        id: held[1].id,
        token: held[1].token,
    };
    let claimed = b
        .claim_with_acks(&queues(&["default"]), 5, &[last])
        .await
        .unwrap();
    assert!(claimed.jobs.is_empty());
    assert!(claimed.stale_acks.is_empty());
    let left = client
        .query_one(
            "SELECT count(*) FROM drover.jobs WHERE id = $1",
            &[&last.id],
        )
        .await
        .unwrap()
        .get::<_, i64>(0);
    assert_eq!(left, 0, "the last ack deleted its job");
}

#[tokio::test]
async fn renewal_keeps_a_lease_alive_past_its_first_expiry() {
    let db = db().await;
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let a = broker(&db, clock.clone()).await;
    enqueue(&db, clock.as_ref(), "default", 1, None).await;
    let job = a.claim(&queues(&["default"]), 1).await.unwrap().remove(0);
    let lease = Lease {
        id: job.id,
        token: job.token,
    };
    for _ in 0..5 {
        clock.advance(LEASE / 3); // as the master renews
        assert_eq!(a.renew(&[lease]).await.unwrap().renewed, vec![job.id]);
        assert_eq!(a.reap_expired().await.unwrap().released, 0);
    }
    // 5/3 of the lease after the claim, far past its first end, the job is still ours.
    assert_eq!(a.settle(&[Settle::Ack(lease)]).await.unwrap().acked, 1);
}

#[tokio::test]
async fn an_unstarted_release_gives_the_attempt_back_and_keeps_the_place_in_line() {
    let db = db().await;
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let a = broker(&db, clock.clone()).await;
    let ids = enqueue(&db, clock.as_ref(), "default", 3, Some(1)).await;
    let jobs = a.claim(&queues(&["default"]), 3).await.unwrap();
    assert_eq!(
        jobs.iter().map(|j| j.id).collect::<Vec<_>>(),
        ids,
        "claimed in fetch order"
    );
    let settles: Vec<Settle> = jobs
        .iter()
        .map(|j| Settle::Release {
            lease: Lease {
                id: j.id,
                token: j.token,
            },
            delay: Duration::ZERO,
            charged: false,
        })
        .collect();
    assert_eq!(a.settle(&settles).await.unwrap().released, 3);
    let again = a.claim(&queues(&["default"]), 1).await.unwrap();
    assert_eq!(again[0].id, ids[0], "the first job is still first");
    assert_eq!(again[0].attempts, 1, "uncharged: this is attempt 1 again");
}

#[tokio::test]
async fn a_charged_release_waits_for_its_delay_and_the_next_due_time_is_known() {
    let db = db().await;
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let a = broker(&db, clock.clone()).await;
    enqueue(&db, clock.as_ref(), "default", 1, None).await;
    let job = a.claim(&queues(&["default"]), 1).await.unwrap().remove(0);
    let lease = Lease {
        id: job.id,
        token: job.token,
    };
    a.settle(&[Settle::Release {
        lease,
        delay: Duration::from_secs(30),
        charged: true,
    }])
    .await
    .unwrap();
    assert!(a.claim(&queues(&["default"]), 1).await.unwrap().is_empty());
    let wait = a
        .next_due(&queues(&["default"]))
        .await
        .unwrap()
        .expect("a due time");
    assert!(
        wait > Duration::from_secs(29) && wait <= Duration::from_secs(30),
        "{wait:?}"
    );
    clock.advance(Duration::from_secs(31));
    let again = a.claim(&queues(&["default"]), 1).await.unwrap();
    assert_eq!(again[0].attempts, 2);
}

#[tokio::test]
async fn queues_are_served_in_priority_order_and_concurrent_claims_never_overlap() {
    let db = db().await;
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(SystemTime::now()));
    let a = Arc::new(broker(&db, clock.clone()).await);
    let b = Arc::new(broker(&db, clock.clone()).await);
    let low = enqueue(&db, clock.as_ref(), "low", 100, None).await;
    let high = enqueue(&db, clock.as_ref(), "high", 100, None).await;
    let order = queues(&["high", "low"]);
    let first = a.claim(&order, 150).await.unwrap();
    assert!(first[..100].iter().all(|j| j.queue == "high"));
    assert!(first[100..].iter().all(|j| j.queue == "low"));
    // The rest, claimed by two nodes at once, split without overlap.
    let (x, y) = tokio::join!(a.claim(&order, 40), b.claim(&order, 40));
    let mut got: Vec<i64> = first
        .iter()
        .chain(x.unwrap().iter())
        .chain(y.unwrap().iter())
        .map(|j| j.id)
        .collect();
    got.sort();
    let before = got.len();
    got.dedup();
    assert_eq!(before, got.len(), "a job was leased twice");
    let mut all: Vec<i64> = low.into_iter().chain(high).collect();
    all.sort();
    assert_eq!(got, all);
}

#[tokio::test]
async fn an_expired_job_without_attempts_left_fails_instead_of_running_again() {
    let db = db().await;
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let a = broker(&db, clock.clone()).await;
    enqueue(&db, clock.as_ref(), "default", 1, Some(1)).await;
    a.claim(&queues(&["default"]), 1).await.unwrap();
    clock.advance(LEASE + Duration::from_secs(1));
    let reaped = a.reap_expired().await.unwrap();
    assert_eq!((reaped.released, reaped.failed), (0, 1));
    let client = drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap();
    let error: String = client
        .query_one("SELECT error FROM drover.failed_jobs", &[])
        .await
        .unwrap()
        .get(0);
    assert!(error.contains("lease expired"), "{error}");
}

fn lease(job: &drover_broker::LeasedJob) -> Lease {
    Lease {
        id: job.id,
        token: job.token,
    }
}

#[tokio::test]
async fn a_reaped_job_and_a_job_taken_back_from_a_dead_worker_keep_their_place_in_line() {
    let db = db().await;
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let a = broker(&db, clock.clone()).await;
    let default = queues(&["default"]);
    // A: its master dies. B: its worker dies. R: it releases itself with no delay.
    let first = enqueue(&db, clock.as_ref(), "default", 3, None).await;
    let held = a.claim(&default, 3).await.unwrap();
    assert_eq!(held.iter().map(|j| j.id).collect::<Vec<_>>(), first);
    clock.advance(Duration::from_secs(1));
    let later = enqueue(&db, clock.as_ref(), "default", 2, None).await;
    clock.advance(Duration::from_millis(500));
    let outcome = a
        .settle(&[
            Settle::TakeBack {
                lease: lease(&held[1]),
                died: None,
            },
            Settle::Release {
                lease: lease(&held[2]),
                delay: Duration::ZERO,
                charged: true,
            },
        ])
        .await
        .unwrap();
    assert_eq!((outcome.released, outcome.stale.len()), (2, 0));
    // Half a second past A's lease (LEASE from the claim): taken back.
    clock.advance(LEASE - Duration::from_secs(1));
    assert_eq!(a.reap_expired().await.unwrap().released, 1);

    let next = a.claim(&default, 10).await.unwrap();
    let order: Vec<i64> = next.iter().map(|j| j.id).collect();
    assert_eq!(
        order,
        vec![first[0], first[1], later[0], later[1], first[2]],
        "the reaped and the taken-back job go first, in their old places; the job that released \
         itself goes where its delay put it, behind the jobs enqueued before its release"
    );
    let attempts: Vec<i32> = next.iter().map(|j| j.attempts).collect();
    assert_eq!(
        attempts,
        vec![2, 2, 1, 1, 2],
        "every attempt that ran is counted"
    );
}

#[tokio::test]
async fn a_job_taken_back_keeps_its_failure_request_and_a_release_clears_it() {
    let db = db().await;
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let a = broker(&db, clock.clone()).await;
    let default = queues(&["default"]);
    enqueue(&db, clock.as_ref(), "default", 1, None).await;
    let job = a.claim(&default, 1).await.unwrap().remove(0);
    // Timed out: returned uncharged, to be failed by the next worker.
    a.settle(&[Settle::FailLater {
        lease: lease(&job),
        reason: "timeout".into(),
    }])
    .await
    .unwrap();
    let job = a.claim(&default, 1).await.unwrap().remove(0);
    assert_eq!((job.attempts, job.failure.as_deref()), (1, Some("timeout")));
    // The worker handling the failure dies: the request stands, the attempt counts.
    assert_eq!(
        a.settle(&[Settle::TakeBack {
            lease: lease(&job),
            died: Some("was killed by SIGKILL".into()),
        }])
        .await
        .unwrap()
        .released,
        1
    );
    let job = a.claim(&default, 1).await.unwrap().remove(0);
    assert_eq!((job.attempts, job.failure.as_deref()), (2, Some("timeout")));
    // Laravel's timeout rules released it with a backoff: handled, so cleared.
    a.settle(&[Settle::Release {
        lease: lease(&job),
        delay: Duration::from_secs(1),
        charged: true,
    }])
    .await
    .unwrap();
    clock.advance(Duration::from_secs(2));
    let job = a.claim(&default, 1).await.unwrap().remove(0);
    assert_eq!((job.attempts, job.failure.as_deref()), (3, None));
    // Its worker dies with no request pending: how it died is kept as a note, and a later death
    // replaces the note.
    let mut job = job;
    for how in ["was killed by SIGSEGV", "exited with code 255"] {
        a.settle(&[Settle::TakeBack {
            lease: lease(&job),
            died: Some(how.into()),
        }])
        .await
        .unwrap();
        job = a.claim(&default, 1).await.unwrap().remove(0);
        assert_eq!(job.failure, Some(format!("died: {how}")));
    }
}

#[tokio::test]
async fn with_the_production_clock_the_database_decides_expiry_and_due_times() {
    let db = db().await;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    assert_eq!(
        clock.now(),
        None,
        "the production clock leaves time to the database"
    );
    let a = broker(&db, clock.clone()).await;
    let default = queues(&["default"]);
    let client = drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap();
    // Seconds between a job's times and the database's now.
    let seconds = |sql: &'static str, id: i64| {
        let client = &client;
        async move {
            client
                .query_one(sql, &[&id])
                .await
                .unwrap()
                .get::<_, f64>(0)
        }
    };
    const EXPIRES_IN: &str =
        "SELECT extract(epoch FROM lease_expires_at - now())::float8 FROM drover.jobs WHERE id = $1";
    const EXPIRES_AT: &str =
        "SELECT extract(epoch FROM lease_expires_at)::float8 FROM drover.jobs WHERE id = $1";
    const DUE_IN: &str =
        "SELECT extract(epoch FROM available_at - now())::float8 FROM drover.jobs WHERE id = $1";

    enqueue(&db, clock.as_ref(), "default", 1, None).await;
    let job = a.claim(&default, 1).await.unwrap().remove(0);
    // Each bound compares the database's now() of two statements: the upper one is the property,
    // the lower one leaves a loaded machine 5 s between them.
    let left = seconds(EXPIRES_IN, job.id).await;
    assert!(
        left > 15.0 && left <= 20.0,
        "lease ends {left} s after the database's now"
    );
    let first_end = seconds(EXPIRES_AT, job.id).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(a.renew(&[lease(&job)]).await.unwrap().renewed, vec![job.id]);
    let left = seconds(EXPIRES_IN, job.id).await;
    assert!(
        left > 15.0 && left <= 20.0,
        "renewed to {left} s after the database's now"
    );
    // The renewal ran at least 300 ms after the claim, by the database's clock.
    let moved = seconds(EXPIRES_AT, job.id).await - first_end;
    assert!(
        moved >= 0.3,
        "the renewal moved the lease's end by {moved} s"
    );
    // Not expired by the database's clock: nothing to take back.
    assert_eq!(a.reap_expired().await.unwrap().released, 0);

    a.settle(&[Settle::Release {
        lease: lease(&job),
        delay: Duration::from_secs(30),
        charged: true,
    }])
    .await
    .unwrap();
    let due = seconds(DUE_IN, job.id).await;
    assert!(
        due > 25.0 && due <= 30.0,
        "due {due} s after the database's now"
    );
    let wait = a.next_due(&default).await.unwrap().expect("a due time");
    assert!(
        wait > Duration::from_secs(25) && wait <= Duration::from_secs(30),
        "{wait:?}"
    );
    assert!(a.claim(&default, 1).await.unwrap().is_empty());
    assert_eq!(
        a.backlog(&default, 10).await.unwrap(),
        vec![("default".to_string(), 0)]
    );
    a.heartbeat(None).await.unwrap();
}

#[tokio::test]
async fn next_due_finds_the_earliest_delayed_job_across_queues_and_priorities() {
    let db = db().await;
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let a = broker(&db, clock.clone()).await;
    let client = drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap();
    let delayed = |queue: &'static str, priority: i16, secs: f64| {
        let (client, clock) = (&client, clock.clone());
        async move {
            client
                .execute(
                    "INSERT INTO drover.jobs (queue, priority, payload, available_at)
                     VALUES ($1, $2, 'p', $3::timestamptz + make_interval(secs => $4))",
                    &[&queue, &priority, &clock.time(), &secs],
                )
                .await
                .unwrap();
        }
    };
    assert_eq!(a.next_due(&queues(&["a", "b"])).await.unwrap(), None);
    // Ready jobs are not delayed; delayed ones at several priorities in two queues.
    delayed("a", 5, 0.0).await;
    delayed("a", 5, 40.0).await;
    delayed("a", 0, 20.0).await;
    delayed("a", -3, 30.0).await;
    delayed("b", 9, 15.0).await;
    delayed("c", 0, 1.0).await;
    let due = |qs: &'static [&'static str]| {
        let a = &a;
        async move {
            a.next_due(&queues(qs))
                .await
                .unwrap()
                .map(|d| d.as_secs_f64())
        }
    };
    assert_eq!(due(&["a"]).await, Some(20.0));
    assert_eq!(due(&["a", "b"]).await, Some(15.0));
    assert_eq!(due(&["c", "a"]).await, Some(1.0));
    clock.advance(Duration::from_secs(25));
    assert_eq!(
        due(&["a"]).await,
        Some(5.0),
        "20 s passed 25 s ago: the -3 one is next"
    );
    // Held jobs are not waiting (the two due ones are claimed).
    let held = a.claim(&queues(&["a"]), 10).await.unwrap();
    assert_eq!(held.len(), 2);
    assert_eq!(due(&["a"]).await, Some(5.0));
}

#[tokio::test]
async fn a_call_without_an_answer_in_time_times_out_and_the_next_one_reconnects() {
    let db = db().await;
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    // A 6 s lease: each call has 3 s, room for the reconnect after the blocker lets go on a
    // loaded machine. The server's statement_timeout (3/5 of the lease by default) is set far
    // off, so only the client's deadline can end the blocked calls: a client stalled past the
    // server's timeout would otherwise see the server's error first.
    let mut config = BrokerConfig::new(db.pg.url());
    config.lease = Duration::from_secs(6);
    config.statement_timeout = Some(Duration::from_secs(60));
    let a = Broker::start(config, clock.clone()).await.unwrap();
    assert_eq!(a.call_deadline(), Duration::from_secs(3));
    assert!(a.renew_deadline() < a.call_deadline());
    let blocker = drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap();
    blocker
        .batch_execute(
            "BEGIN; LOCK TABLE drover.jobs IN ACCESS EXCLUSIVE MODE; LOCK TABLE drover.nodes IN ACCESS EXCLUSIVE MODE",
        )
        .await
        .unwrap();
    for call in ["next_due", "deregister"] {
        let started = std::time::Instant::now();
        let result = match call {
            "next_due" => a.next_due(&queues(&["default"])).await.map(|_| ()),
            _ => a.deregister().await,
        };
        let took = started.elapsed();
        assert!(
            matches!(result, Err(BrokerError::TimedOut { .. })),
            "{call}: {result:?}"
        );
        assert!(result.unwrap_err().is_connection_lost());
        assert!(
            // Not before the deadline, and not long after it (a loaded machine's timers are late).
            took >= Duration::from_secs(3) && took < Duration::from_secs(8),
            "{call} gave up after {took:?}"
        );
    }
    blocker.batch_execute("ROLLBACK").await.unwrap();
    // The suspect connection is replaced: the next calls work.
    assert_eq!(a.next_due(&queues(&["default"])).await.unwrap(), None);
    enqueue(&db, clock.as_ref(), "default", 1, None).await;
    assert_eq!(a.claim(&queues(&["default"]), 1).await.unwrap().len(), 1);
    a.deregister().await.unwrap();
}

/// What a job's own transaction does on the application's connection: its effect, then
/// `drover.complete_within` — left open, for the test to commit or roll back.
async fn open_completion(
    db: &Db,
    lease: Lease,
) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let client = drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap();
    client
        .batch_execute("CREATE TABLE IF NOT EXISTS effects (job bigint); BEGIN")
        .await?;
    client
        .execute("INSERT INTO effects VALUES ($1)", &[&lease.id])
        .await?;
    client
        .execute(
            "SELECT drover.complete_within($1, $2)",
            &[&lease.id, &lease.token],
        )
        .await?;
    Ok(client)
}

async fn effects(db: &Db, job: i64) -> i64 {
    let client = drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap();
    client
        .query_one("SELECT count(*) FROM effects WHERE job = $1", &[&job])
        .await
        .unwrap()
        .get(0)
}

#[tokio::test]
async fn a_completion_within_the_jobs_transaction_is_fenced_by_its_lease_and_learned_once_however_the_worker_ends(
) {
    let db = db().await;
    let clock = Arc::new(ManualClock::new(SystemTime::now()));
    let a = broker(&db, clock.clone()).await;
    let b = broker(&db, clock.clone()).await;
    enqueue(&db, clock.as_ref(), "default", 5, None).await;
    let jobs = a.claim(&queues(&["default"]), 5).await.unwrap();
    let [said, died, frozen, taken, rode] = [0, 1, 2, 3, 4].map(|i| lease(&jobs[i]));

    // Its worker commits and says so: the row is gone, a renewal finds it completed (not lost),
    // and the settle forgets the completion, once.
    open_completion(&db, said)
        .await
        .unwrap()
        .batch_execute("COMMIT")
        .await
        .unwrap();
    let renewed = a.renew(&[said]).await.unwrap();
    assert_eq!(
        (renewed.renewed, renewed.completed),
        (vec![], vec![said.id])
    );
    let outcome = a.settle(&[Settle::CompletedWithin(said)]).await.unwrap();
    assert_eq!(
        (outcome.completed_within, outcome.stale),
        (vec![said.id], vec![])
    );
    let outcome = a.settle(&[Settle::CompletedWithin(said)]).await.unwrap();
    assert_eq!(outcome.completed_within, Vec::<i64>::new(), "learned once");

    // Its ack rides a claim, as a plain job's does: the claim forgets the completion.
    open_completion(&db, rode)
        .await
        .unwrap()
        .batch_execute("COMMIT")
        .await
        .unwrap();
    let claimed = a
        .claim_with_acks(&queues(&["default"]), 1, &[rode])
        .await
        .unwrap();
    assert_eq!(
        (claimed.jobs.len(), claimed.stale_acks),
        (0, vec![]),
        "nothing left to claim; the ack is not stale"
    );

    // Its worker commits and is killed before it says so: the exit's take-back changes nothing
    // and learns the completion instead of reporting a stale lease.
    open_completion(&db, died)
        .await
        .unwrap()
        .batch_execute("COMMIT")
        .await
        .unwrap();
    let outcome = a
        .settle(&[Settle::TakeBack {
            lease: died,
            died: Some("was killed by SIGKILL".into()),
        }])
        .await
        .unwrap();
    assert_eq!(
        (outcome.released, outcome.completed_within, outcome.stale),
        (0, vec![died.id], vec![])
    );

    // Its worker froze between complete_within and its commit: the row is locked. A renewal
    // neither waits for it nor calls it lost; a reap past its lease skips it; once the worker is
    // killed (its connection closes) the transaction rolls back, its effect with it, and the
    // next reap takes the job back.
    let open = open_completion(&db, frozen).await.unwrap();
    let renewed = tokio::time::timeout(Duration::from_secs(5), a.renew(&[frozen, taken]))
        .await
        .expect("a renewal never waits on a job's open transaction")
        .unwrap();
    assert_eq!(
        (renewed.renewed, renewed.busy),
        (vec![taken.id], vec![frozen.id])
    );
    clock.advance(LEASE * 2);
    assert_eq!(
        b.reap_expired().await.unwrap().released,
        1,
        "only the job not locked"
    );
    drop(open);
    let mut reaped = 0;
    for _ in 0..50 {
        reaped = b.reap_expired().await.unwrap().released;
        if reaped == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(reaped, 1, "taken back once its transaction rolled back");
    assert_eq!(effects(&db, frozen.id).await, 0, "its effect rolled back");

    // Its lease was taken back (reaped above) before its transaction completed it: the
    // completion raises DRL01, and the transaction's effect rolls back with it.
    let Err(err) = open_completion(&db, taken).await else {
        panic!("a completion under a lease taken back was not fenced");
    };
    assert_eq!(err.code().map(|c| c.code()), Some("DRL01"), "{err}");
    assert_eq!(effects(&db, taken.id).await, 0);
    let again = b.claim(&queues(&["default"]), 4).await.unwrap();
    assert_eq!(
        again.len(),
        2,
        "the frozen and the taken-back job run again, nothing else"
    );
    assert_eq!(
        effects(&db, said.id).await + effects(&db, died.id).await + effects(&db, rode.id).await,
        3
    );
    let completions: i64 = drover_broker::connect::connect_once(db.pg.url())
        .await
        .unwrap()
        .query_one("SELECT count(*) FROM drover.completions", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(completions, 0, "every completion learned once");
}
