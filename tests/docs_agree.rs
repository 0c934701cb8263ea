//! The docs agree with the repository, with no database and no process:
//!
//! - every figure README.md cites as measured is still in the file it names as its source
//!   (`bench/RESULTS.md`, `bench/notes.md` with its command, or the doc of the test that measured
//!   it), by a table of (README phrase, source file, phrase in the source): a README figure edited
//!   without its source, or a source regenerated with other figures, fails;
//! - every other figure with a unit in README.md (a default, a bound a test allows, a workload's
//!   size) is listed here as not measured, with what it is: a figure added to the README without
//!   either entry fails, naming it;
//! - every file path the README and the docs name (a Markdown link, or a path under one of the
//!   repository's top directories) exists.
//!
//! Phrases are compared with every run of white space as one space, so a rewrapped line still
//! matches.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// `text` with every run of white space made one space.
fn squash(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A figure the README cites as measured, and where it comes from.
struct Measured {
    /// Words of README.md around the figure (squashed).
    readme: &'static str,
    /// The file that holds the measurement.
    source: &'static str,
    /// What that file says (squashed): every one must be in it.
    says: &'static [&'static str],
}

const MEASURED: &[Measured] = &[
    Measured {
        readme: "demo: 4000 enqueued, 4000 completed, 0 lost, 0 duplicated, 230 jobs/s, master PSS 2.8 MiB",
        source: "bench/notes.md",
        says: &[
            "## The demo's line (README)",
            "demo: 4000 enqueued, 4000 completed, 0 lost, 0 duplicated, 230 jobs/s, master PSS 2.8 MiB",
        ],
    },
    Measured {
        readme: "the master's PSS in shape 2 fell from 3.1 to 2.3 MiB and the whole stack's rose by 0.5 MiB",
        source: "bench/notes.md",
        says: &[
            "Master PSS** fell from 3.1 to 2.3 MiB",
            "The stack PSS, which counts both processes, rose by 0.5 MiB",
        ],
    },
    Measured {
        readme: "(7–10 ms from the SIGKILL to the released rows on an idle machine",
        source: "docs/leases.md",
        says: &["(7–10 ms from the SIGKILL to the released rows"],
    },
    // Shape 5, Laravel 8.83 (RESULTS.md) and Laravel 12.67 (notes.md, from results/).
    Measured {
        readme: "4 workers 43 MiB on Laravel 8.83",
        source: "bench/RESULTS.md",
        says: &["| drover | 4 | 3/3 valid | 42.9 | 43.3 |"],
    },
    Measured {
        readme: "and 55 MiB on Laravel 12.67",
        source: "bench/notes.md",
        says: &["4 forked workers **54.6 MiB**"],
    },
    Measured {
        readme: "against 101 and 134 MiB with each worker started by exec",
        source: "bench/RESULTS.md",
        says: &["| drover (exec) | 4 | 3/3 valid | 100.1 | 101.1 |"],
    },
    Measured {
        readme: "against 101 and 134 MiB with each worker started by exec",
        source: "bench/notes.md",
        says: &["(exec'd 133.9, queue:work database 135.7, redis 130.2)"],
    },
    Measured {
        readme: "96–136 MiB for 4 `queue:work` processes",
        source: "bench/RESULTS.md",
        says: &[
            "| queue:work database | 4 | 3/3 valid | 100.1 | 100.9 |",
            "| queue:work redis | 4 | 3/3 valid | 95.0 | 96.0 |",
        ],
    },
    Measured {
        readme: "32 workers 66 and 82 MiB, against 636–953 MiB",
        source: "bench/RESULTS.md",
        says: &[
            "| drover | 32 | 3/3 valid | 63.6 | 66.4 |",
            "| queue:work redis | 32 | 3/3 valid | 627.9 | 636.2 |",
        ],
    },
    Measured {
        readme: "32 workers 66 and 82 MiB, against 636–953 MiB",
        source: "bench/notes.md",
        says: &["32 forked workers **81.7 MiB** (exec'd 913.5, peers 953.4 and 908.1)"],
    },
    Measured {
        readme: "A forked worker said hello 6.6 ms (p50) after the master asked for it, one started by exec 176 ms",
        source: "bench/RESULTS.md",
        says: &[
            "| drover | 612 | 6.62 | 19.85 | 0.74 |",
            "| drover (exec) | 612 | 176.04 | 367.91 | 2.24 |",
        ],
    },
    Measured {
        readme: "(Laravel 8.83; 8.7 and 393 ms on Laravel 12.67)",
        source: "bench/notes.md",
        says: &["Ready 8.7 ms p50 (p99 18.9) forked against 393 ms exec'd"],
    },
    // Shape 6, Laravel 8.83: the run at 250,000 groups (RESULTS.md), and the million-group run
    // of issue 19, kept in notes.md since RESULTS.md holds the later one.
    Measured {
        readme: "at 250,000 groups created during the run, scaled down from a million to fit the time this shared machine gave, each group's three jobs enqueued back to back: 499,843 of the 500,000 consecutive same-group pairs had their later job enqueued before the earlier one finished, so it waited behind its group's head, and over them there were 0 order violations and 0 overlaps, nothing lost or doubled, at 1,221 jobs/s on a machine other work was loading (the same checks over the same jobs without groups: 76,793 order violations, 77,842 overlaps)",
        source: "bench/RESULTS.md",
        says: &[
            "**Scaled down** (250000 groups,",
            "| grouped (250000 groups) | 750000 | yes | 1221 |",
            "750000 of 750000 jobs completed, 0 lost, 0 duplicated",
            "Order: 500000 consecutive same-group pairs, 499843 of which waited behind their head",
            "0 enqueued out of the plan's order: 0 order violations, 0 overlaps. Conditions: 250000 groups, 750000 jobs",
            "0 enqueued out of the plan's order: 76793 order violations, 77842 overlaps",
            "1-minute load average 4.34 just before the workers started, 7.39 at most and 5.39 median",
        ],
    },
    Measured {
        readme: "on an idle machine, lost or doubled nothing and drained at 85% of the same run without groups (3,529 against 4,143 jobs/s, both bounded by the producers), but none of its jobs waited behind its group's head",
        source: "bench/notes.md",
        says: &[
            "on an otherwise idle machine",
            "grouped 3,000,000 jobs over 1,000,000 groups at 3,529 jobs/s",
            "the ungrouped control 4,143 jobs/s",
            "nothing lost or doubled; 0 rows inserted into drover.group_jobs",
            "Grouped against the control (the same producers, cores and job count): **85%**.",
        ],
    },
    Measured {
        readme: "(a group of 10,000 jobs beside 1,000 groups of 10, all queued before the workers started: 0 order violations, 0 overlaps)",
        source: "bench/RESULTS.md",
        says: &[
            "**Hot group**: one group of 10000 jobs enqueued first, then 1000 groups of 10 round-robin",
            "Verifier: 0 order violations, 0 overlaps, 0 lost, 0 duplicated over 1001 groups.",
        ],
    },
];

/// Figures with a unit in README.md that are not measurements, and what each is.
const NOT_MEASURED: &[(&str, &str)] = &[
    ("(10 ms of busy work)", "the demo's job"),
    ("(a master killed in the ≤ 5 ms an ack waits", "ack_ride_wait, a setting"),
    (
        "(the pool waits at most 200 ms before the new start; the test allows 5 s for a loaded machine)",
        "the restart delay and a test's bound",
    ),
    ("a random worker SIGKILLed every 200 ms", "the scenario's pace"),
    ("then down for 10 s", "the scenario's outage"),
    ("settling resumes within 2 s of its return", "the scenario's bound"),
    ("a 10 MB line", "a poison job's size"),
    ("is replaced within 200 ms", "the restart delay after a death in service"),
    ("(a job that busy-waits 200 ms shows 200 ms of CPU)", "an example"),
    ("| `--lease` | 30s |", "a default"),
    ("(at least 3 s)", "a limit"),
    ("| `--shutdown-grace` | 30s |", "a default"),
    ("| `--poll-interval` | 5s |", "a default"),
    ("| `--memory-check-interval` | 5s |", "a default"),
];

/// Each figure with a unit in `text`: its byte span and itself.
fn figures(text: &str) -> Vec<(usize, usize, &str)> {
    const UNITS: &[&str] = &[
        "MiB", "KiB", "GiB", "MB", "KB", "GB", "jobs/s", "ms", "µs", "s", "%", "×",
    ];
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < text.len() {
        let c = text[i..].chars().next().unwrap();
        let before = text[..i].chars().next_back();
        let starts = c.is_ascii_digit()
            && !before.is_some_and(|b| b.is_alphanumeric() || b == '.' || b == '_' || b == '/');
        if !starts {
            i += c.len_utf8();
            continue;
        }
        let mut end = i;
        for (j, ch) in text[i..].char_indices() {
            if ch.is_ascii_digit() || matches!(ch, ',' | '.' | '–' | '-') {
                end = i + j + ch.len_utf8();
            } else {
                break;
            }
        }
        // A number ends with a digit ("10 s." is 10, not "10 s").
        while !text[..end].ends_with(|ch: char| ch.is_ascii_digit()) {
            end -= text[..end].chars().next_back().unwrap().len_utf8();
        }
        let mut unit_at = end;
        if bytes.get(unit_at) == Some(&b' ') {
            unit_at += 1;
        }
        let rest = &text[unit_at..];
        let unit = UNITS.iter().find(|u| {
            rest.starts_with(**u)
                && !(u.ends_with(|ch: char| ch.is_alphabetic())
                    && rest[u.len()..]
                        .chars()
                        .next()
                        .is_some_and(|ch| ch.is_alphanumeric()))
        });
        if let Some(unit) = unit {
            let stop = unit_at + unit.len();
            found.push((i, stop, &text[i..stop]));
            i = stop;
        } else {
            i = end;
        }
    }
    found
}

/// The char boundary at or before byte `at` of `text`.
fn boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The byte spans of every occurrence of `phrase` in `text`.
fn spans(text: &str, phrase: &str) -> Vec<(usize, usize)> {
    text.match_indices(phrase)
        .map(|(at, _)| (at, at + phrase.len()))
        .collect()
}

#[test]
fn every_figure_the_readme_cites_as_measured_is_in_its_source() {
    let readme = squash(&read("README.md"));
    let mut wrong = Vec::new();
    for m in MEASURED {
        if !readme.contains(m.readme) {
            wrong.push(format!(
                "README.md no longer says {:?}: if its figure changed, check it against {} and update this table",
                m.readme, m.source
            ));
        }
        let source = squash(&read(m.source));
        for says in m.says {
            if !source.contains(says) {
                wrong.push(format!(
                    "{} no longer says {:?}, the source of README.md's {:?}: update the README's figure (and this table) from it",
                    m.source, says, m.readme
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
}

#[test]
fn every_figure_in_the_readme_is_either_sourced_or_named_as_not_measured() {
    let readme = squash(&read("README.md"));
    let mut covered = Vec::new();
    let mut stale = Vec::new();
    let phrases = MEASURED
        .iter()
        .map(|m| m.readme)
        .chain(NOT_MEASURED.iter().map(|(p, _)| *p));
    for phrase in phrases {
        let found = spans(&readme, phrase);
        if found.is_empty() {
            stale.push(phrase);
        }
        covered.extend(found);
    }
    let loose: Vec<String> = figures(&readme)
        .into_iter()
        .filter(|(from, to, _)| !covered.iter().any(|(a, b)| a <= from && to <= b))
        .map(|(from, to, figure)| {
            let context = &readme[boundary(&readme, from.saturating_sub(60))
                ..boundary(&readme, (to + 40).min(readme.len()))];
            format!("{figure:?} in \"…{context}…\"")
        })
        .collect();
    assert!(
        loose.is_empty(),
        "figures in README.md that name no source: add each to MEASURED in tests/docs_agree.rs \
         with the bench/RESULTS.md or bench/notes.md line it comes from, or to NOT_MEASURED if it \
         is a setting or a bound:\n{}",
        loose.join("\n")
    );
    assert!(
        stale.is_empty(),
        "phrases of tests/docs_agree.rs no longer in README.md: {stale:#?}"
    );
}

/// The documents whose paths are checked.
fn documents() -> Vec<String> {
    let mut docs = vec!["README.md".to_string(), "bench/README.md".to_string()];
    for dir in ["docs", "docs/decisions"] {
        let mut in_dir: Vec<String> = std::fs::read_dir(root().join(dir))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".md"))
            .map(|name| format!("{dir}/{name}"))
            .collect();
        in_dir.sort();
        docs.extend(in_dir);
    }
    docs
}

/// The targets of the Markdown links in `text` that point into the repository (no scheme, no
/// bare fragment), without their fragment.
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    for (at, _) in text.match_indices("](") {
        let rest = &text[at + 2..];
        let Some(close) = rest.find(')') else {
            continue;
        };
        let target = rest[..close].trim();
        if target.is_empty() || target.starts_with('#') || target.contains("://") {
            continue;
        }
        if target.starts_with("mailto:") {
            continue;
        }
        let target = target.split('#').next().unwrap();
        targets.push(target.to_string());
    }
    targets
}

/// The repository's top directories a path in a document may start with.
const TOP: &[&str] = &[
    "docs/",
    "src/",
    "broker/",
    "supervisor/",
    "php-client/",
    "bench/",
    "tests/",
    "dist/",
    "scripts/",
];

/// The paths under `TOP` that `text` names, outside Markdown links too.
fn named_paths(text: &str) -> Vec<String> {
    let mut paths = Vec::new();
    for top in TOP {
        for (at, _) in text.match_indices(top) {
            let before = text[..at].chars().next_back();
            if before.is_some_and(|b| b.is_alphanumeric() || "/._-~$@:".contains(b)) {
                continue;
            }
            let tail = &text[at..];
            let len = tail
                .find(|ch: char| !(ch.is_ascii_alphanumeric() || "_./@-".contains(ch)))
                .unwrap_or(tail.len());
            let after = tail[len..].chars().next();
            // A pattern or a placeholder (`tests/*.rs`, `results/<name>`), not a path.
            if after.is_some_and(|ch| "*<{…".contains(ch)) {
                continue;
            }
            let path = tail[..len].trim_end_matches(['.', '-']);
            paths.push(path.to_string());
        }
    }
    paths
}

/// Whether `path` names something in the repository: as it is, or as the unique entry of its
/// directory it begins (`docs/decisions/0001` for `0001-fork-workers-from-a-zygote.md`).
fn exists(path: &Path) -> bool {
    if path.exists() {
        return true;
    }
    let (Some(dir), Some(start)) = (path.parent(), path.file_name()) else {
        return false;
    };
    let start = start.to_string_lossy();
    if start.is_empty() || !start.chars().all(|c| c.is_ascii_digit()) {
        return false;
    }
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .filter_map(Result::ok)
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(&format!("{start}-"))
            })
            .count()
            == 1
    })
}

#[test]
fn every_path_the_readme_and_the_docs_name_exists() {
    let mut missing = Vec::new();
    let mut checked = 0;
    for doc in documents() {
        let text = read(&doc);
        let dir = root().join(&doc).parent().unwrap().to_path_buf();
        for target in link_targets(&text) {
            checked += 1;
            if !exists(&dir.join(&target)) {
                missing.push(format!("{doc}: link to {target}"));
            }
        }
        for path in named_paths(&text) {
            // Named from the repository's root, or (bench/README.md's `src/…`) from the
            // document's own directory.
            checked += 1;
            if !exists(&root().join(&path)) && !exists(&dir.join(&path)) {
                missing.push(format!("{doc}: {path}"));
            }
        }
    }
    eprintln!("{checked} paths checked");
    // The scanner found what the docs name (hundreds), not nothing.
    assert!(checked > 200, "only {checked} paths found in the docs");
    missing.sort();
    missing.dedup();
    assert!(
        missing.is_empty(),
        "paths named in the docs that do not exist:\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_figure_scanner_finds_figures_and_leaves_versions_and_names_alone() {
    let text = "7–10 ms, 230 jobs/s, 2.8 MiB, 85%, 30s, 10 s. Laravel 8.83, fd 3, 0006-a, 0.1.0-1_amd64, v2";
    let found: Vec<&str> = figures(text).into_iter().map(|(_, _, f)| f).collect();
    assert_eq!(
        found,
        ["7–10 ms", "230 jobs/s", "2.8 MiB", "85%", "30s", "10 s"]
    );
}

/// The section of docs/architecture.md that follows a job file by file.
const JOB_WAY: &str = "## One job, end to end";

/// Each (file, function) the job's way names: a function is named (`name()`, in backticks)
/// after the Rust or PHP file that defines it, in the same step (a call inside a named SQL file,
/// such as `now()`, is SQL's own).
fn job_way_steps(text: &str) -> Vec<(String, String)> {
    let start = text
        .find(JOB_WAY)
        .unwrap_or_else(|| panic!("docs/architecture.md has no {JOB_WAY:?} section"));
    let section = &text[start + JOB_WAY.len()..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let mut named = Vec::new();
    for step in section.split("\n\n").flat_map(|para| para.split("\n1. ")) {
        let mut file: Option<String> = None;
        for (i, token) in step.split('`').enumerate() {
            if i % 2 == 0 {
                continue;
            }
            if let Some(name) = token.strip_suffix("()") {
                let name = name.rsplit("::").next().unwrap();
                if let Some(file) = &file {
                    named.push((file.clone(), name.to_string()));
                }
            } else if TOP.iter().any(|top| token.starts_with(top)) {
                file = [".rs", ".php"]
                    .iter()
                    .any(|ext| token.ends_with(ext))
                    .then(|| token.to_string());
            }
        }
    }
    named
}

#[test]
fn each_function_the_jobs_way_names_is_defined_in_the_file_named_with_it() {
    let steps = job_way_steps(&read("docs/architecture.md"));
    // The way names the functions of every step, not a few.
    assert!(
        steps.len() >= 25,
        "only {} functions named: {steps:?}",
        steps.len()
    );
    let mut missing = Vec::new();
    for (file, name) in &steps {
        let text = read(file);
        let defined = match file.ends_with(".rs") {
            true => [format!("fn {name}("), format!("fn {name}<")]
                .iter()
                .any(|d| text.contains(d.as_str())),
            false => text.contains(&format!("function {name}(")),
        };
        if !defined {
            missing.push(format!("{file}: {name}()"));
        }
    }
    assert!(
        missing.is_empty(),
        "docs/architecture.md's \"One job, end to end\" names functions its files do not define:\n{}",
        missing.join("\n")
    );
}
