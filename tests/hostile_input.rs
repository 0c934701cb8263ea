//! Hostile input at every door, on Laravel 8.83 and 12.67: a job that writes garbage, a frame
//! over the limit or a forged settle to its worker's socket; payloads no JSON reader takes
//! (nested 10,000 deep, a lone surrogate) and bytes that are not UTF-8; queue, tag, class and
//! group names with SQL metacharacters, markup and control characters through dispatch, every
//! dashboard search and the artisan verbs that take a queue; the dashboard, `/metrics` and
//! `/healthz` hammered by concurrent clients while the master serves. Each gets a clear answer,
//! and no job is lost or run twice. (The frame decoder, payload reader and config reader also
//! have property tests of 100,000 cases a property: bench/hostile_inputs.sh.)

mod support;

use std::time::Duration;

use support::serve::{get_answered, serve};
use support::*;

fn eval(app: &LaravelApp, php: &str) -> String {
    app.artisan(&["app:eval", php])
}

/// `app:eval` of `php` with `getenv("TROUBLE")` the troubled name, exactly as bytes.
fn eval_troubled(app: &LaravelApp, php: &str) -> String {
    let out = app
        .command(&["app:eval", php])
        .env("TROUBLE", TROUBLE)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    said
}

/// The labels journaled with `event`, each with how many times.
async fn journaled(client: &tokio_postgres::Client, event: &str) -> Vec<(String, i64)> {
    client
        .query(
            "SELECT label, count(*) FROM journal WHERE event = $1 GROUP BY label ORDER BY label",
            &[&event],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

/// A cluster, the fixture application on it and its master with two workers, serving.
async fn serving(laravel: Laravel) -> (Cluster, tokio_postgres::Client, LaravelApp, Spawned) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db, laravel);
    app.env.push(("DROVER_PROCESSES".into(), "2".into()));
    let master = start_master(&app, 2).await;
    (db, client, app, master)
}

async fn a_job_that_writes_garbage_a_huge_frame_or_a_forged_settle_to_its_socket_is_run_again_and_nothing_is_lost(
    laravel: Laravel,
) {
    let (db, client, app, master) = serving(laravel).await;
    eval(
        &app,
        r#"foreach (["garbage", "oversized", "forged"] as $mode) { App\Jobs\SocketVandalJob::dispatch("vandal $mode", $mode); }
           foreach (range(1, 10) as $i) { App\Jobs\NapJob::dispatch("bystander $i", 20); }"#,
    );
    wait_count(
        &client,
        "SELECT count(*) FROM journal WHERE event = 'end'",
        13,
        Duration::from_secs(60),
    )
    .await;
    let log = stop_master(&app, master).await;
    // Each ran to its end once; each vandal on its second attempt, in a worker that replaced the
    // one it broke.
    let ends = journaled(&client, "end").await;
    assert_eq!(ends.len(), 13, "{ends:?}");
    assert!(ends.iter().all(|(_, n)| *n == 1), "{ends:?}");
    let second: i64 = count(
        &client,
        "SELECT count(*) FROM journal WHERE event = 'end' AND label LIKE 'vandal %' AND attempt = 2",
    )
    .await;
    assert_eq!(second, 3, "{log}");
    assert!(log.contains("malformed frame"), "{log}");
    assert!(
        log.contains("frame longer than the 1048576-byte limit"),
        "{log}"
    );
    assert!(
        log.contains("reported done for job 987654321") && log.contains("which it does not hold"),
        "{log}"
    );
    assert!(!log.contains("panicked"), "{log}");
    db.stop().await;
}

async fn payloads_no_json_reader_takes_fail_by_name_and_bytes_that_are_not_utf8_are_refused_at_dispatch(
    laravel: Laravel,
) {
    let (db, client, app, master) = serving(laravel).await;
    // Laravel's payload with its `data` nested 10,000 deep, and one whose display name is a lone
    // UTF-16 surrogate: valid UTF-8 text, which neither PHP's nor serde's JSON reader takes.
    eval(
        &app,
        r#"$q = Illuminate\Support\Facades\Queue::connection("drover");
           $base = json_decode(json_encode(["uuid" => "u", "displayName" => "App\\Jobs\\NapJob", "job" => "Illuminate\\Queue\\CallQueuedHandler@call", "maxTries" => 1, "timeout" => null, "data" => ["commandName" => "App\\Jobs\\NapJob", "command" => "x"]]), true);
           $deep = str_repeat("[", 10000) . str_repeat("]", 10000);
           $payload = json_encode(array_merge($base, ["uuid" => "deep"]));
           $q->pushRaw(substr($payload, 0, -2) . ',"deep":' . $deep . '}}');
           $q->pushRaw(str_replace('"u"', '"surrogate"', str_replace('App\\\\Jobs\\\\NapJob"', 'App\\\\Jobs\\\\NapJob\\udc80"', json_encode($base))));
           foreach (range(1, 5) as $i) { App\Jobs\NapJob::dispatch("after $i"); }"#,
    );
    // Bytes that are not UTF-8 never reach a worker: the dispatch itself is refused, by name.
    let out = app
        .command(&[
            "app:eval",
            r#"Illuminate\Support\Facades\Queue::connection("drover")->pushRaw("{\"job\":\"\xff\xfe\"}");"#,
        ])
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("SQLSTATE[22021]") && said.contains("0xff"),
        "{said}"
    );

    wait_count(
        &client,
        "SELECT count(*) FROM journal WHERE event = 'end'",
        5,
        Duration::from_secs(60),
    )
    .await;
    // The two unreadable payloads end as failed jobs, saying why; none stays queued or held.
    wait_count(
        &client,
        "SELECT count(*) FROM drover.failed_jobs",
        2,
        Duration::from_secs(60),
    )
    .await;
    let log = stop_master(&app, master).await;
    assert_eq!(
        count(&client, "SELECT count(*) FROM drover.jobs").await,
        0,
        "{log}"
    );
    // Kept, raw, by the master (Laravel's failer reads the payload to log it, and cannot),
    // each saying why it never ran.
    let errors: Vec<String> = client
        .query("SELECT error FROM drover.failed_jobs ORDER BY id", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    for why in [
        "Maximum stack depth exceeded",
        "Single unpaired UTF-16 surrogate in unicode escape",
    ] {
        assert!(
            errors.iter().any(|e| e.contains(&format!(
                "its payload is not JSON this worker can read ({why}), so it was failed without running"
            ))),
            "{why}: {errors:?}"
        );
    }
    assert_eq!(
        count(
            &client,
            "SELECT count(DISTINCT label) * 10 + count(*) FROM journal
              WHERE label LIKE 'after %' AND event = 'end'"
        )
        .await,
        55,
        "each job behind the unreadable ones ran to its end exactly once"
    );
    assert!(!log.contains("panicked"), "{log}");
    db.stop().await;
}

/// What a page says went wrong (its exception's message), not its kilobytes of styles.
fn why(page: &str) -> String {
    match page.find("<title>") {
        Some(at) => page[at..page.len().min(at + 400)].to_string(),
        None => page.chars().take(400).collect(),
    }
}

/// A name that is every kind of trouble at once: quotes, a statement terminator and a comment
/// (SQL), LIKE's wildcards and its escape, markup (a page), a tab and an escape character.
const TROUBLE: &str = "q'\"; DROP TABLE journal; -- 100%_\\ <script>alert(1)</script>\t\x1b[31m";

async fn names_with_sql_metacharacters_markup_and_control_characters_pass_every_door(
    laravel: Laravel,
) {
    let db = Cluster::start().await;
    let client = db.client().await;
    let mut app = LaravelApp::new(&db, laravel);
    app.env.push(("SESSION_DRIVER".into(), "file".into()));
    let master = start_master(&app, 4).await;
    let size = eval_troubled(
        &app,
        r#"$name = getenv("TROUBLE");
           App\Jobs\NapJob::dispatch("on the troubled queue")->onQueue($name);
           App\Jobs\GroupJob::dispatch($name, "in the troubled group");
           echo Illuminate\Support\Facades\Queue::connection("drover")->size($name);"#,
    );
    assert_eq!(size.trim(), "1");
    wait_count(
        &client,
        "SELECT count(*) FROM journal WHERE event = 'group_end'",
        1,
        Duration::from_secs(30),
    )
    .await;
    // Its row goes with its settle, which may ride with the next claim a moment later.
    wait_count(
        &client,
        "SELECT count(*) FROM drover.jobs WHERE queue = 'default'",
        0,
        Duration::from_secs(30),
    )
    .await;
    let queued: Vec<String> = client
        .query("SELECT queue FROM drover.jobs", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(queued, [TROUBLE]);

    // Every dashboard search, with the name as each parameter: answered, the markup escaped.
    // A NUL, bytes that are not UTF-8, or a list where one value is meant: refused by name
    // (400), never a database error.
    let (server, port) = serve(&app, "local", true);
    let encoded: String = TROUBLE.bytes().map(|b| format!("%{b:02X}")).collect();
    for (path, param) in [
        ("/drover/jobs/pending?tag=", "tag"),
        ("/drover/jobs/delayed?tag=", "tag"),
        ("/drover/jobs/running?tag=", "tag"),
        ("/drover/completed?tag=", "tag"),
        ("/drover/tags?tag=", "tag"),
        ("/drover/class?class=", "class"),
        ("/drover/group?queue=default&name=", "name"),
        ("/drover/group?name=x&queue=", "queue"),
    ] {
        // A group page names no group, or one that is gone (its one job ran): 404, saying so; a
        // list: 200.
        let want = if path.starts_with("/drover/group?") {
            404
        } else {
            200
        };
        // Empty (Laravel 12's ConvertEmptyStringsToNull makes it null): no filter, not refused.
        let (code, page) = get_answered(port, path);
        assert_eq!(code, want, "{path}: {}", why(&page));
        let (code, page) = get_answered(port, &format!("{path}{encoded}"));
        assert_eq!(code, want, "{path}: {}", why(&page));
        assert!(!page.contains("<script>alert(1)"), "{path}: unescaped");
        // (A NUL inside the text: Laravel 12's TrimStrings takes one off either end.)
        for (bad, problem) in [
            ("a%00b", "holds a NUL byte"),
            ("%FF%FE", "is not UTF-8 text"),
            (&format!("{encoded}%00{encoded}")[..], "holds a NUL byte"),
        ] {
            let (code, page) = get_answered(port, &format!("{path}{bad}"));
            assert_eq!(code, 400, "{path}{bad}: {}", why(&page));
            assert!(
                page.contains(&format!("the query parameter `{param}` {problem}")),
                "{path}{bad}: {}",
                why(&page)
            );
        }
        let list = path.replace(&format!("{param}="), &format!("{param}[]=x"));
        let (code, page) = get_answered(port, &list);
        assert_eq!(code, 400, "{list}: {}", why(&page));
        assert!(
            page.contains("must be a single value, not a list"),
            "{list}"
        );
    }

    // The dashboard hammered while the master serves: 8 clients, 5 overviews and 5 job lists
    // each, as jobs run; every page answers, and every job runs once.
    eval(
        &app,
        r#"foreach (range(1, 30) as $i) { App\Jobs\NapJob::dispatch("under the hammer $i", 50); }"#,
    );
    let clients: Vec<_> = (0..8)
        .map(|_| {
            std::thread::spawn(move || {
                (0..5)
                    .flat_map(|_| {
                        [
                            get_answered(port, "/drover").0,
                            get_answered(port, "/drover/jobs/pending").0,
                        ]
                    })
                    .collect::<Vec<u16>>()
            })
        })
        .collect();
    let codes: Vec<u16> = clients
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    assert_eq!(codes.len(), 80);
    assert!(codes.iter().all(|c| *c == 200), "{codes:?}");
    wait_count(
        &client,
        "SELECT count(*) FROM journal WHERE event = 'end' AND label LIKE 'under the hammer %'",
        30,
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM (SELECT label FROM journal WHERE event = 'end'
               GROUP BY label HAVING count(*) > 1) AS t"
        )
        .await,
        0
    );
    drop(server);

    // The artisan verbs that take a queue: pause, continue, clear.
    let queue = format!("--queue=drover:{TROUBLE}");
    let paused = app.artisan(&["drover:pause", &queue]);
    assert!(paused.contains("paused"), "{paused}");
    assert_eq!(
        count(&client, "SELECT count(*) FROM drover.paused_queues").await,
        1
    );
    app.artisan(&["drover:continue", &queue]);
    assert_eq!(
        count(&client, "SELECT count(*) FROM drover.paused_queues").await,
        0
    );
    let cleared = app.artisan(&["queue:clear", "drover", &format!("--queue={TROUBLE}")]);
    assert!(cleared.contains('1'), "{cleared}");
    // The troubled queue's job is gone (the default queue's last rows go with their settles).
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM drover.jobs WHERE queue <> 'default'"
        )
        .await,
        0
    );
    assert_eq!(
        count(
            &client,
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'journal'"
        )
        .await,
        1
    );
    stop_master(&app, master).await;
    db.stop().await;
}

/// The master's open file descriptors.
fn open_fds(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

#[tokio::test]
async fn metrics_and_healthz_hammered_while_the_master_serves_answer_every_request_and_lose_no_job()
{
    let db = Cluster::start().await;
    let client = db.client().await;
    let ids = enqueue(db.dsn(), 300, &["--ms=5", "--batch=300"]);
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let drover = db.drover(&["--workers", "2", "--metrics-listen", &listen]);
    // Serving: its workers said hello (before that, /healthz says 503, no worker serving).
    let mut serving = false;
    for _ in 0..400 {
        if http_get(port, "/healthz").0 == 200 {
            serving = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(serving, "the master did not serve on {listen}");
    let fds_before = open_fds(drover.pid());

    // 32 clients, 25 requests each, while the jobs run; among them requests that are not HTTP,
    // a head over the 8 KiB limit, and connections that say nothing and hang up.
    let clients: Vec<_> = (0..32)
        .map(|c| {
            std::thread::spawn(move || {
                let mut codes = Vec::new();
                for i in 0..25 {
                    let code = match (c + i) % 10 {
                        0 => http(port, "\x00\x7f not http\r\n\r\n").0,
                        1 => {
                            http(
                                port,
                                &format!(
                                    "GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n",
                                    "a".repeat(16 * 1024)
                                ),
                            )
                            .0
                        }
                        2 => {
                            drop(std::net::TcpStream::connect(("127.0.0.1", port)));
                            continue;
                        }
                        3 => http_get(port, "/healthz").0,
                        _ => http_get(port, "/metrics").0,
                    };
                    codes.push(((c + i) % 10, code));
                }
                codes
            })
        })
        .collect();
    let codes: Vec<(usize, u16)> = clients
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    for (kind, code) in &codes {
        let want = match kind {
            0 | 1 => 400,
            _ => 200,
        };
        assert_eq!(*code, want, "request kind {kind}: {codes:?}");
    }
    let silent = (0..32)
        .flat_map(|c| (0..25).map(move |i| (c + i) % 10))
        .filter(|kind| *kind == 2)
        .count();
    assert_eq!(codes.len(), 32 * 25 - silent);

    wait_finished_at_least(&client, ids.len() as i64).await;
    assert_exactly_once(&client, &ids).await;
    // Every connection was closed: a descriptor kept per connection would show as hundreds
    // (a few come and go with the workers' pipes and the compaction's connection).
    let fds_after = open_fds(drover.pid());
    assert!(
        fds_after <= fds_before + 10,
        "the master held {fds_before} descriptors before the requests and {fds_after} after"
    );
    let log = drover.stop().await;
    assert!(!log.contains("panicked"), "{log}");
    db.stop().await;
}

on_every_laravel!(
    a_job_that_writes_garbage_a_huge_frame_or_a_forged_settle_to_its_socket_is_run_again_and_nothing_is_lost,
    payloads_no_json_reader_takes_fail_by_name_and_bytes_that_are_not_utf8_are_refused_at_dispatch,
    names_with_sql_metacharacters_markup_and_control_characters_pass_every_door,
);
