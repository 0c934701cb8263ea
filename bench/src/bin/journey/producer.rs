//! The steady producer: open loop, `rate` jobs a second, whatever the queues do. As web requests
//! do, each dispatch runs in a PHP process that booted the application from a host's `current`
//! (the hosts in turn, a process a second, dispatching that second's jobs at their times), so a
//! deploy's configuration — `QUEUE_CONNECTION` above all — reaches the producers as it reaches
//! php-fpm: with the release. Each dispatch prints its seq, whether it went through, the
//! connection and the release it used, and when it began and ended.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use crate::world::{now, Host, OnHost};

/// The code each producer process runs (`php current/artisan app:eval`): JOURNEY_PLAN is
/// `seq:at:ms,...`, each job dispatched at `at` (Unix seconds) with the default connection.
const PRODUCER_PHP: &str = r#"
foreach (explode(',', getenv('JOURNEY_PLAN')) as $item) {
    [$seq, $at, $ms] = explode(':', $item);
    $wait = (float) $at - microtime(true);
    if ($wait > 0) {
        usleep((int) ($wait * 1e6));
    }
    $t = microtime(true);
    try {
        \Illuminate\Support\Facades\Bus::dispatch(new \Journey\JourneyJob((int) $seq, (int) $ms));
        [$ok, $why] = ['ok', '-'];
    } catch (\Throwable $e) {
        [$ok, $why] = ['fail', str_replace(["\n", ' '], ['|', '_'], substr(get_class($e) . ': ' . $e->getMessage(), 0, 300))];
    }
    printf("%d %s %s %s %.6f %.6f %s\n", $seq, $ok, config('queue.default'), \Journey\JourneyJob::RELEASE, $t, microtime(true), $why);
}
"#;

/// One dispatch.
#[derive(Debug, Clone)]
pub struct Dispatch {
    pub seq: u64,
    /// When it was planned for (the open loop's clock).
    pub planned: f64,
    pub ok: bool,
    /// The connection the producer's process dispatched with (`-` when it never ran).
    pub connection: String,
    /// When the dispatch call began.
    pub began: f64,
    pub why: String,
}

/// A job's run time, ms: 50 to 300, from its seq.
pub fn job_ms(seq: u64) -> u64 {
    50 + (seq.wrapping_mul(2_654_435_761) % 251)
}

pub struct Producer {
    stop: Rc<RefCell<bool>>,
    pub dispatches: Rc<RefCell<Vec<Dispatch>>>,
    /// Producer processes still running.
    running: Rc<RefCell<usize>>,
}

impl Producer {
    /// Starts dispatching `rate` jobs a second from the next whole second, from `hosts` in turn.
    pub fn start(hosts: &[&Host], rate: f64) -> Producer {
        let on: Vec<OnHost> = hosts.iter().map(|h| h.on.clone()).collect();
        let names: Vec<String> = on.iter().map(|h| h.name.clone()).collect();
        let stop = Rc::new(RefCell::new(false));
        let dispatches = Rc::new(RefCell::new(Vec::new()));
        let running = Rc::new(RefCell::new(0usize));
        let (s, d, r) = (stop.clone(), dispatches.clone(), running.clone());
        tokio::task::spawn_local(async move {
            let start = now().floor() + 1.0;
            let mut seq = 0u64;
            let mut tick = 0usize;
            loop {
                let second = start + tick as f64;
                let wait = second - now() - 0.3;
                if wait > 0.0 {
                    tokio::time::sleep(Duration::from_secs_f64(wait)).await;
                }
                if *s.borrow() {
                    return;
                }
                // This second's jobs, evenly spaced; the process starts 0.3 s early to boot.
                let mut plan = Vec::new();
                let first = (tick as f64 * rate).ceil() as u64;
                let last = ((tick + 1) as f64 * rate).ceil() as u64;
                for k in first..last {
                    seq += 1;
                    let at = start + k as f64 / rate;
                    plan.push((seq, at, job_ms(seq)));
                }
                let host = tick % names.len();
                tick += 1;
                if plan.is_empty() {
                    continue;
                }
                let text: Vec<String> = plan
                    .iter()
                    .map(|(s, at, ms)| format!("{s}:{at:.6}:{ms}"))
                    .collect();
                let mut cmd = on[host].artisan(&["app:eval", PRODUCER_PHP]);
                cmd.env("JOURNEY_PLAN", text.join(","))
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped());
                let (d, r) = (d.clone(), r.clone());
                *r.borrow_mut() += 1;
                tokio::task::spawn_local(async move {
                    let out = cmd.output().await;
                    let (stdout, stderr) = match &out {
                        Ok(o) => (
                            String::from_utf8_lossy(&o.stdout).into_owned(),
                            String::from_utf8_lossy(&o.stderr).into_owned(),
                        ),
                        Err(e) => (String::new(), e.to_string()),
                    };
                    let mut said: std::collections::HashMap<u64, Dispatch> = stdout
                        .lines()
                        .filter_map(|l| {
                            let f: Vec<&str> = l.split(' ').collect();
                            if f.len() != 7 {
                                return None;
                            }
                            let seq = f[0].parse().ok()?;
                            Some((
                                seq,
                                Dispatch {
                                    seq,
                                    planned: 0.0,
                                    ok: f[1] == "ok",
                                    connection: f[2].to_string(),
                                    began: f[4].parse().ok()?,
                                    why: f[6].to_string(),
                                },
                            ))
                        })
                        .collect();
                    let mut all = d.borrow_mut();
                    for (seq, at, _) in plan {
                        let mut one = said.remove(&seq).unwrap_or_else(|| Dispatch {
                            seq,
                            planned: at,
                            ok: false,
                            connection: "-".into(),
                            began: at,
                            why: format!(
                                "the producer process printed nothing for it: {}",
                                stderr.lines().last().unwrap_or("")
                            ),
                        });
                        one.planned = at;
                        all.push(one);
                    }
                    *r.borrow_mut() -= 1;
                });
            }
        });
        Producer {
            stop,
            dispatches,
            running,
        }
    }

    /// Stops the loop and waits for the processes still dispatching.
    pub async fn stop(&self) {
        *self.stop.borrow_mut() = true;
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while *self.running.borrow() > 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Every dispatch so far, by seq.
    pub fn all(&self) -> Vec<Dispatch> {
        let mut v = self.dispatches.borrow().clone();
        v.sort_by_key(|d| d.seq);
        v
    }
}
