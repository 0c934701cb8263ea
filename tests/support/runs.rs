//! The handler's records (`public.runs`: a start, an end and, for long jobs, a beat every
//! [`BEAT`], on the database's clock) and the assertions every fault scenario makes over them:
//! nothing lost, nothing completed twice, no two executions of one job overlapping in time.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio_postgres::Client;

/// How often a long job records that it still runs.
pub const BEAT: Duration = Duration::from_millis(50);

/// One run of one job by one worker process, from the handler's records.
#[derive(Debug)]
pub struct Execution {
    pub job: i64,
    pub pid: i32,
    pub attempt: i32,
    /// Seconds since the epoch, by the database's clock.
    pub start: f64,
    /// The last record it wrote (its finish, or its last beat if it was killed).
    pub last: f64,
    pub finished: bool,
}

pub async fn executions(client: &Client) -> Vec<Execution> {
    client
        .query(
            "SELECT job_id, pid, attempt,
                    extract(epoch FROM min(at) FILTER (WHERE event = 'start'))::float8,
                    extract(epoch FROM max(at))::float8,
                    bool_or(event = 'finish')
             FROM runs GROUP BY job_id, pid, attempt
             HAVING count(*) FILTER (WHERE event = 'start') > 0
             ORDER BY job_id, 4",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| Execution {
            job: r.get(0),
            pid: r.get(1),
            attempt: r.get(2),
            start: r.get(3),
            last: r.get(4),
            finished: r.get(5),
        })
        .collect()
}

/// The executions as they ran, by the processes that ran them: the last execution of a worker
/// the test killed (`killed`: pid → when) ran no code after the kill, so it started and ended by
/// then at the latest, whatever its records say. Its records can say later: each is stamped by
/// the server when it runs the statement, and a statement the worker sent just before it died —
/// its start, or its finish while it waited for the answer — runs as late as a loaded machine
/// schedules it (seen: 3 ms and 46 ms after the re-run of the job had begun).
/// Each comes with whether it is the one its worker was killed in.
fn as_they_ran(execs: &[Execution], killed: &BTreeMap<i32, f64>) -> Vec<(Execution, bool)> {
    let mut last_of: BTreeMap<i32, f64> = BTreeMap::new();
    for e in execs {
        let latest = last_of.entry(e.pid).or_insert(e.start);
        *latest = latest.max(e.start);
    }
    execs
        .iter()
        .map(|e| {
            let mut e = Execution { ..*e };
            let mut cut = false;
            if let (Some(at), Some(last)) = (killed.get(&e.pid), last_of.get(&e.pid)) {
                if e.start == *last && *at >= e.start - 0.05 || e.start > *at {
                    e.start = e.start.min(*at);
                    e.last = e.last.min(*at);
                    cut = true;
                }
            }
            (e, cut)
        })
        .collect()
}

/// No two executions of one job overlap: each ended before the next one started (the next by
/// when it started, as they ran: [`as_they_ran`]). One whose worker the test killed ended then at
/// the latest; one that was killed otherwise (no finish) ended within two beats of its last
/// record (a long job beats every [`BEAT`]).
pub fn assert_no_overlap(execs: &[Execution], killed: &BTreeMap<i32, f64>) -> usize {
    let ran = as_they_ran(execs, killed);
    let mut by_job: BTreeMap<i64, Vec<&(Execution, bool)>> = BTreeMap::new();
    for e in &ran {
        by_job.entry(e.0.job).or_default().push(e);
    }
    let mut rerun = 0;
    for (job, mut runs) in by_job {
        rerun += usize::from(runs.len() > 1);
        runs.sort_by(|a, b| a.0.start.total_cmp(&b.0.start));
        for pair in runs.windows(2) {
            let ((a, cut), (b, _)) = (pair[0], pair[1]);
            let ended = match (a.finished, cut) {
                (true, _) | (false, true) => a.last,
                (false, false) => a.last + 2.0 * BEAT.as_secs_f64(),
            };
            assert!(
                ended < b.start,
                "job {job} ran in two places at once: {a:?} still ran {:.3} s after {b:?} started",
                ended - b.start
            );
        }
    }
    rerun
}

/// The most executions that ran at once, as they ran ([`as_they_ran`]): each from its start to
/// its finish, or, killed, to its last record (cut at the kill when the test killed its worker)
/// plus two beats, the longest it may have gone on unrecorded. What a budget bounds.
#[allow(dead_code)] // not every test binary that includes this module uses every helper
pub fn most_at_once(execs: &[Execution], killed: &BTreeMap<i32, f64>) -> usize {
    let mut edges: Vec<(f64, i32)> = Vec::new();
    for (e, cut) in as_they_ran(execs, killed) {
        let ended = match (e.finished, cut) {
            (true, _) | (false, true) => e.last,
            (false, false) => e.last + 2.0 * BEAT.as_secs_f64(),
        };
        edges.push((e.start, 1));
        edges.push((ended, -1));
    }
    // At one instant an end comes before a start: the two did not run at once.
    edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut now, mut most) = (0i32, 0i32);
    for (_, step) in edges {
        now += step;
        most = most.max(now);
    }
    most as usize
}

/// The promise of ordered groups over the records: `grouped` are job ids in enqueue order, the
/// n-th of them in group n mod `groups`. Within a group no two executions overlap (as
/// [`assert_no_overlap`] judges one job's) and executions follow enqueue order: a job may run
/// again (a retry keeps its place), but none starts before every earlier job of its group has
/// finished.
pub fn assert_groups_in_order_one_at_a_time(
    execs: &[Execution],
    grouped: &[i64],
    groups: usize,
    killed: &BTreeMap<i32, f64>,
) {
    let place: BTreeMap<i64, (usize, usize)> = grouped
        .iter()
        .enumerate()
        .map(|(i, id)| (*id, (i % groups, i / groups)))
        .collect();
    let mut by_group: BTreeMap<usize, Vec<Execution>> = BTreeMap::new();
    for (e, _) in &as_they_ran(execs, killed) {
        if let Some((group, _)) = place.get(&e.job) {
            by_group.entry(*group).or_default().push(Execution {
                // One "job" per group, so that assert_no_overlap checks the group's executions.
                job: *group as i64,
                pid: e.pid,
                attempt: e.attempt,
                start: e.start,
                last: e.last,
                finished: e.finished,
            });
            let runs = by_group.get_mut(group).unwrap();
            let n = runs.len() - 1;
            runs[n].attempt = place[&e.job].1 as i32;
        }
    }
    for (group, mut runs) in by_group {
        runs.sort_by(|a, b| a.start.total_cmp(&b.start));
        // `attempt` now holds the job's place in its group.
        for pair in runs.windows(2) {
            assert!(
                pair[1].attempt == pair[0].attempt
                    || (pair[1].attempt == pair[0].attempt + 1 && pair[0].finished),
                "group g{group}: its job {} started after job {} (finished: {}): out of order; the group's executions by start (attempt = place in the group): {runs:#?}",
                pair[1].attempt,
                pair[0].attempt,
                pair[0].finished
            );
            assert!(
                pair[1].attempt == pair[0].attempt || pair[0].last < pair[1].start,
                "group g{group}: its job {} started {:.3} s before job {} ended",
                pair[1].attempt,
                pair[0].last - pair[1].start,
                pair[0].attempt
            );
        }
        assert_no_overlap(&runs, killed);
    }
}

/// Every job in `ids` finished exactly once.
pub fn assert_each_finished_once(execs: &[Execution], ids: &[i64]) {
    let mut finishes: BTreeMap<i64, usize> = ids.iter().map(|id| (*id, 0)).collect();
    for e in execs.iter().filter(|e| e.finished) {
        *finishes.entry(e.job).or_default() += 1;
    }
    let twice: Vec<_> = finishes.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "jobs completed more than once: {twice:?}; their executions: {:#?}",
        execs
            .iter()
            .filter(|e| finishes.get(&e.job).is_some_and(|n| *n > 1))
            .collect::<Vec<_>>()
    );
    let lost: Vec<_> = finishes.iter().filter(|(_, n)| **n == 0).collect();
    assert!(
        lost.is_empty(),
        "{} jobs never completed: {:?}",
        lost.len(),
        &lost[..lost.len().min(20)]
    );
    assert_eq!(finishes.len(), ids.len(), "completed jobs never enqueued");
}
