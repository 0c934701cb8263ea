//! The docs agree with the repository, with no database (the one process run is the built
//! binary's own `--help`):
//!
//! - every figure README.md cites as measured is still in the file it names as its source
//!   (`bench/RESULTS.md`, `bench/notes.md` with its command, or the doc of the test that measured
//!   it), by a table of (README phrase, source file, phrase in the source): a README figure edited
//!   without its source, or a source regenerated with other figures, fails;
//! - every other figure with a unit in README.md (a default, a bound a test allows, a workload's
//!   size) is listed here as not measured, with what it is: a figure added to the README without
//!   either entry fails, naming it;
//! - every file path the README and the docs name (a Markdown link, or a path under one of the
//!   repository's top directories) exists;
//! - every name README.md and docs/*.md give exists in the code: each artisan command `drover:*`
//!   (and `horizon:terminate`, the one Laravel verb the package registers) in the `$signature` of
//!   a command DroverServiceProvider registers, with every `--flag` written after it; each
//!   `drover SUB` and its flags in `drover SUB --help`; each `DROVER_*` variable read by the code;
//!   each `drover.x.y` a key of php-client/config/drover.php or an object of drover's schema,
//!   each `metrics.trim`-like key a key of it, and a field of the JSON contract never given as
//!   one of its keys; each unit (`drover@.service`, `drover.service`, `drover@myapp`) a file of
//!   dist/. A failure names the doc and line, the name, and what it was checked against;
//! - what the docs once said in different ways is said one way: `drover status`'s exit codes,
//!   the advice on `TimeoutStopSec`, when an outage stops a running job, which gate the
//!   dashboard's actions take; docs/cli.md lists every flag of `drover run`; the README starts
//!   with the two commands, stays under 1,200 words and lists every page of docs/.
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

const MEASURED: &[Measured] = &[Measured {
    readme:
        "demo: 4000 enqueued, 4000 completed, 0 lost, 0 duplicated, 247 jobs/s, master PSS 2.7 MiB",
    source: "bench/notes.md",
    says: &[
        "## The demo's line (README)",
        "demo: 4000 enqueued, 4000 completed, 0 lost, 0 duplicated, 247 jobs/s, master PSS 2.7 MiB",
    ],
}];

/// Figures with a unit in README.md that are not measurements, and what each is.
const NOT_MEASURED: &[(&str, &str)] = &[];

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

// ---------------------------------------------------------------------------------------------
// Names: every artisan command, `drover` subcommand, flag, environment variable, config key and
// unit a doc names exists in the code.
// ---------------------------------------------------------------------------------------------

/// The documents whose names are checked: README.md and docs/*.md (bench/'s pages and the
/// decision records, which keep the names of their time, are not).
fn named_documents() -> Vec<String> {
    let mut docs: Vec<String> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    docs.sort();
    docs.insert(0, "README.md".to_string());
    docs
}

/// The 1-based line of byte `at` of `text`.
fn line_of(text: &str, at: usize) -> usize {
    text[..at].matches('\n').count() + 1
}

/// The code of a Markdown text, each piece with the byte it starts at: every line of a fenced
/// block, and every code span (`…`, which may wrap; its line breaks made spaces) outside them.
fn code_pieces(text: &str) -> Vec<(usize, String)> {
    let mut pieces = Vec::new();
    // The prose, fenced blocks blanked out (same length, so offsets hold).
    let mut prose = String::with_capacity(text.len());
    let mut in_fence = false;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let fence = line.trim_start().starts_with("```");
        if in_fence && !fence {
            pieces.push((at, without_comment(line.trim_end()).to_string()));
        }
        if fence || in_fence {
            for c in line.chars() {
                match c {
                    '\n' => prose.push('\n'),
                    // As many bytes as the character, so offsets hold.
                    c => prose.extend(std::iter::repeat_n(' ', c.len_utf8())),
                }
            }
        } else {
            prose.push_str(line);
        }
        if fence {
            in_fence = !in_fence;
        }
        at += line.len();
    }
    let bytes = prose.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'`' {
            i += 1;
            continue;
        }
        let run = bytes[i..].iter().take_while(|&&b| b == b'`').count();
        let open = i + run;
        // The closing run of the same length, within the paragraph.
        let mut j = open;
        let mut close = None;
        while j < bytes.len() {
            if bytes[j] == b'\n' && bytes.get(j + 1) == Some(&b'\n') {
                break;
            }
            if bytes[j] == b'`' {
                let n = bytes[j..].iter().take_while(|&&b| b == b'`').count();
                if n == run {
                    close = Some(j);
                    break;
                }
                j += n;
                continue;
            }
            j += 1;
        }
        match close {
            Some(j) => {
                let span = prose[open..j]
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ");
                pieces.push((i, span));
                i = j + run;
            }
            None => i = open,
        }
    }
    pieces.sort_by_key(|(at, _)| *at);
    pieces
}

/// A line of code without its comment (`# …` or `// …`, at its start or after a space): what
/// it runs, not what it says.
fn without_comment(line: &str) -> &str {
    let mut end = line.len();
    for mark in ["#", "//"] {
        if line.trim_start().starts_with(mark) {
            return "";
        }
        if let Some(at) = line.find(&format!(" {mark} ")) {
            end = end.min(at);
        }
    }
    line[..end].trim_end()
}

/// A command a piece of code runs, with the flags written after it.
#[derive(Debug, PartialEq)]
enum Invocation {
    /// `drover SUB --flag …` (the binary, by any path).
    Binary { sub: String, flags: Vec<String> },
    /// `php artisan drover…` or `drover:NAME --flag …` (an artisan command of the package).
    Artisan { name: String, flags: Vec<String> },
}

/// Whether a word names the drover binary: `drover`, `/usr/bin/drover`, `ExecStart=/usr/bin/drover`
/// (not an environment variable's value, `DROVER_BINARY=/usr/bin/drover`).
fn is_binary(word: &str) -> bool {
    let word = match word.split_once('=') {
        Some((name, _)) if name.chars().all(|c| c.is_ascii_uppercase() || c == '_') => {
            return false
        }
        Some((_, value)) => value,
        None => word,
    };
    word == "drover" || word.ends_with("/drover")
}

/// Whether the word before a command lets it start one: a shell's separator or prefix, or an
/// environment assignment (`sudo drover status`, `X=1 drover run`); otherwise `drover` is a word
/// of a message (`another drover master is already running`).
fn starts_command(before: &str) -> bool {
    [
        "sudo", "exec", "&&", "||", ";", "|", "$", "#", "time", "nohup",
    ]
    .contains(&before)
        || before.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase() || c == '_')
        })
}

fn is_artisan(word: &str) -> bool {
    word == "artisan" || word.ends_with("/artisan")
}

/// `drover:NAME` at the start of `word`: NAME, lowercase, digits and dashes.
fn artisan_name(word: &str) -> Option<String> {
    let rest = word.strip_prefix("drover:")?;
    if !rest.starts_with(|c: char| c.is_ascii_lowercase()) {
        return None;
    }
    let len = rest
        .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
        .unwrap_or(rest.len());
    Some(format!("drover:{}", rest[..len].trim_end_matches('-')))
}

/// The flag a word writes (`--pool=NAME`, `[--json]`): its name, or None.
fn flag_of(word: &str) -> Option<String> {
    let word = word.trim_start_matches(['[', '(']);
    let name = word.strip_prefix("--")?;
    let len = name
        .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
        .unwrap_or(name.len());
    let name = &name[..len];
    (!name.is_empty()).then(|| name.to_string())
}

/// Every command a piece of code runs: the binary's subcommands and the package's artisan
/// commands, each with the flags that follow it (up to `--`, the end of a shell command, or the
/// next command).
fn invocations(code: &str) -> Vec<Invocation> {
    let words: Vec<&str> = code.split_whitespace().collect();
    let mut found = Vec::new();
    let mut k = 0;
    while k < words.len() {
        let word = words[k];
        let after_artisan = k > 0 && is_artisan(words[k - 1]);
        let after_queue_verb = k > 0 && words[k - 1].starts_with("queue:");
        let start = if after_artisan && word == "drover" {
            Some(Invocation::Artisan {
                name: "drover".into(),
                flags: Vec::new(),
            })
        } else if let Some(name) = artisan_name(word).filter(|_| !after_queue_verb) {
            Some(Invocation::Artisan {
                name,
                flags: Vec::new(),
            })
        } else if !after_artisan && is_binary(word) && (k == 0 || starts_command(words[k - 1])) {
            // Its subcommand, or none (`drover --version`: the flags of the binary itself).
            let sub = words.get(k + 1).filter(|sub| {
                sub.starts_with(|c: char| c.is_ascii_lowercase())
                    && sub.chars().all(|c| c.is_ascii_lowercase() || c == '-')
            });
            if sub.is_some() {
                k += 1;
            }
            Some(Invocation::Binary {
                sub: sub.map_or(String::new(), |s| s.to_string()),
                flags: Vec::new(),
            })
        } else {
            None
        };
        k += 1;
        let Some(mut invocation) = start else {
            continue;
        };
        let flags = match &mut invocation {
            Invocation::Binary { flags, .. } | Invocation::Artisan { flags, .. } => flags,
        };
        while k < words.len() {
            let word = words[k];
            let ends = word == "--"
                || word.starts_with('#')
                || ["&&", ";", "|", "||", "/"].contains(&word)
                || is_binary(word)
                || word == "php"
                || artisan_name(word).is_some();
            if ends {
                break;
            }
            if let Some(flag) = flag_of(word) {
                flags.push(flag);
            }
            k += 1;
        }
        found.push(invocation);
    }
    found
}

/// The package's artisan commands a text names, code or prose, each with its byte: `drover:NAME`,
/// not a `connection:queue` (`'drover:api' => 10`, `queue:pause drover:default`,
/// `--queue=drover:default`, `drover:default,drover:…`).
fn artisan_names(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (at, _) in text.match_indices("drover:") {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|b| b.is_alphanumeric() || "_-/.'\"=,:".contains(b)) {
            continue;
        }
        let previous_word = text[..at].split_whitespace().next_back().unwrap_or("");
        if before.is_some_and(char::is_whitespace)
            && previous_word
                .trim_start_matches(['`', '('])
                .starts_with("queue:")
        {
            continue;
        }
        if let Some(name) = artisan_name(&text[at..]) {
            found.push((at, name));
        }
    }
    found
}

/// The `DROVER_*` environment variables a text names, each with its byte (`DROVER_*`, a
/// pattern, is not one).
fn env_names(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (at, _) in text.match_indices("DROVER_") {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|b| b.is_ascii_alphanumeric() || b == '_') {
            continue;
        }
        let rest = &text[at..];
        let len = rest
            .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(rest.len());
        let name = rest[..len].trim_end_matches('_');
        if name.len() > "DROVER".len() {
            found.push((at, name.to_string()));
        }
    }
    found
}

/// The names a text gives as `drover.x[.y…]` — a key of config/drover.php (`drover.metrics.trim`)
/// or an object of drover's schema (`drover.jobs`, `drover.jobs.lease_grace`) — each with its
/// byte. Not a file (`config/drover.php`, `drover.service`), a part of a path or host
/// (`storage/drover.root-…`, `example.com/drover.git`), or a pattern (`drover.limit_*`).
fn dotted_names(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (at, _) in text.match_indices("drover.") {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|b| b.is_alphanumeric() || "_/.-@:$".contains(b)) {
            continue;
        }
        let rest = &text[at + "drover.".len()..];
        let len = rest
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || "_.:".contains(c)))
            .unwrap_or(rest.len());
        if rest[len..].starts_with(['*', '<', '-']) {
            continue;
        }
        let name = rest[..len].trim_end_matches(['.', ':']);
        let first = name.split('.').next().unwrap_or("");
        if name.is_empty() || FILE_ENDINGS.contains(&first) {
            continue;
        }
        found.push((at, format!("drover.{name}")));
    }
    found
}

/// What ends a file's name: `x.md` is a file, not a key.
const FILE_ENDINGS: &[&str] = &[
    "php", "service", "md", "rs", "json", "sql", "sh", "env", "toml", "yml", "yaml", "conf", "log",
    "png", "sock", "deb", "git", "txt", "html",
];

/// A code span that is a dotted key of config/drover.php without its `drover.` (`metrics.trim`):
/// the key, when its first part is one of `sections` (the keys whose values are arrays).
fn section_key(span: &str, sections: &BTreeSet<String>) -> Option<String> {
    let parts: Vec<&str> = span.split('.').collect();
    let word = |p: &&str| !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase() || c == '_');
    if parts.len() < 2 || !parts.iter().all(word) {
        return None;
    }
    if FILE_ENDINGS.contains(parts.last().unwrap()) || !sections.contains(parts[0]) {
        return None;
    }
    Some(span.to_string())
}

/// The drover units a text names (`drover@.service`, `drover.service`, `drover@myapp`), each
/// with its byte.
fn unit_names(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (at, _) in text.match_indices("drover") {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|b| b.is_alphanumeric() || b == '_' || b == '-' || b == '.') {
            continue;
        }
        let rest = &text[at..];
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || "@._%{}$-".contains(c)))
            .unwrap_or(rest.len());
        let name = rest[..len].trim_end_matches(['.', '-']);
        if name.contains('@') || name.ends_with(".service") {
            found.push((at, name.to_string()));
        }
    }
    found
}

// --- What the code has -----------------------------------------------------------------------

use std::collections::{BTreeMap, BTreeSet};

/// The text of every file under `dirs` (recursively), with its path.
fn files_under(dirs: &[&str]) -> Vec<(String, String)> {
    fn walk(dir: &Path, into: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, into);
            } else {
                into.push(path);
            }
        }
    }
    let mut paths = Vec::new();
    for dir in dirs {
        walk(&root().join(dir), &mut paths);
    }
    paths.sort();
    paths
        .into_iter()
        .filter_map(|p| {
            let text = std::fs::read_to_string(&p).ok()?;
            let name = p.strip_prefix(root()).unwrap().display().to_string();
            Some((name, text))
        })
        .collect()
}

/// A PHP single-quoted string starting at `text` (after its opening quote), joined with any
/// `' . X . '` concatenations (X kept as a placeholder): its value.
fn php_single_quoted(text: &str) -> String {
    let mut value = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(next) = chars.next() {
                    value.push(next);
                }
            }
            '\'' => {
                // `' . self::X . '` goes on; anything else ends the string.
                let rest: String = chars.clone().collect();
                let trimmed = rest.trim_start();
                if let Some(after) = trimmed.strip_prefix('.') {
                    if let Some(close) = after.find(". '") {
                        value.push('X');
                        let skip = rest.len() - after.len() + close + 3;
                        for _ in 0..rest[..skip].chars().count() {
                            chars.next();
                        }
                        continue;
                    }
                }
                break;
            }
            c => value.push(c),
        }
    }
    value
}

/// An artisan signature's command and options (`{--pool= : …}`, `{--N|name}`).
fn parse_signature(signature: &str) -> (String, BTreeSet<String>) {
    let name = signature
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_string();
    let mut options = BTreeSet::new();
    for (at, _) in signature.match_indices("{--") {
        let rest = &signature[at + 3..];
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '|'))
            .unwrap_or(rest.len());
        let option = rest[..len].rsplit('|').next().unwrap();
        options.insert(option.to_string());
    }
    (name, options)
}

/// Options every artisan command takes (Symfony's console).
const ARTISAN_GLOBAL_OPTIONS: &[&str] = &[
    "help",
    "quiet",
    "verbose",
    "version",
    "ansi",
    "no-ansi",
    "no-interaction",
    "env",
];

/// Laravel's (or Horizon's) verbs the package registers itself, and the docs attribute to it.
const LARAVEL_VERBS_OF_THE_PACKAGE: &[&str] = &["horizon:terminate"];

/// The artisan commands the package registers (DroverServiceProvider's `Console\X::class`
/// list, each X's `$signature`), with their options.
fn artisan_commands() -> BTreeMap<String, BTreeSet<String>> {
    let provider = read("php-client/src/DroverServiceProvider.php");
    let mut commands = BTreeMap::new();
    for (at, _) in provider.match_indices("Console\\") {
        let rest = &provider[at + "Console\\".len()..];
        let Some((class, _)) = rest.split_once("::class") else {
            continue;
        };
        if !class.chars().all(|c| c.is_ascii_alphanumeric()) {
            continue;
        }
        let path = format!("php-client/src/Console/{class}.php");
        let Ok(php) = std::fs::read_to_string(root().join(&path)) else {
            continue;
        };
        let Some(start) = php.find("$signature = '") else {
            continue;
        };
        let signature = php_single_quoted(&php[start + "$signature = '".len()..]);
        let (name, options) = parse_signature(&signature);
        commands.insert(name, options);
    }
    commands
}

/// PHP source without its comments (`//`, `#`, `/* … */`), strings kept.
fn php_tokens(php: &str) -> Vec<PhpToken> {
    let chars: Vec<char> = php.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') || c == '#' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i += 2;
            while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                i += 1;
            }
            i += 2;
        } else if c == '\'' || c == '"' {
            let mut value = String::new();
            i += 1;
            while i < chars.len() && chars[i] != c {
                if chars[i] == '\\' && i + 1 < chars.len() {
                    i += 1;
                }
                value.push(chars[i]);
                i += 1;
            }
            i += 1;
            tokens.push(PhpToken::Str(value));
        } else if c == '=' && next == Some('>') {
            tokens.push(PhpToken::Arrow);
            i += 2;
        } else if c == '[' {
            tokens.push(PhpToken::Open);
            i += 1;
        } else if c == ']' {
            tokens.push(PhpToken::Close);
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else {
            let start = i;
            while i < chars.len() && !chars[i].is_whitespace() && !"[]'\"=,()".contains(chars[i]) {
                i += 1;
            }
            if i == start {
                i += 1;
            }
            tokens.push(PhpToken::Other(chars[start..i].iter().collect()));
        }
    }
    tokens
}

#[derive(Debug, PartialEq)]
enum PhpToken {
    Str(String),
    Arrow,
    Open,
    Close,
    Other(String),
}

/// Every key path of a PHP config file's returned array (`metrics.trim`,
/// `defaults.default.outage_grace`), each with its value's first token (`30`, `env`, `[`).
fn config_paths(php: &str) -> BTreeMap<String, String> {
    let tokens = php_tokens(php);
    let mut paths = BTreeMap::new();
    // The keys of the arrays open around the token; "" for the root and for lists.
    let mut stack: Vec<String> = Vec::new();
    let mut pending: Option<String> = None;
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            PhpToken::Str(key) if tokens.get(i + 1) == Some(&PhpToken::Arrow) => {
                let value = match tokens.get(i + 2) {
                    Some(PhpToken::Open) => "[".to_string(),
                    Some(PhpToken::Str(s)) => format!("'{s}'"),
                    Some(PhpToken::Other(o)) => o.clone(),
                    _ => String::new(),
                };
                if !stack.is_empty() && !stack[1..].iter().any(String::is_empty) {
                    let path: Vec<&str> = stack[1..]
                        .iter()
                        .map(String::as_str)
                        .chain([key.as_str()])
                        .collect();
                    paths.insert(path.join("."), value);
                }
                pending = Some(key.clone());
                i += 2;
                continue;
            }
            PhpToken::Open => stack.push(pending.take().unwrap_or_default()),
            PhpToken::Close => {
                stack.pop();
            }
            _ => pending = None,
        }
        i += 1;
    }
    paths
}

/// The config's maps whose keys are the application's own (a queue, a pool, an environment).
const OPEN_MAPS: &[&str] = &[
    "waits",
    "budgets",
    "fair",
    "groups.hold",
    "dashboard.redact",
    "dashboard.middleware",
];

/// Whether `key` (without `drover.`) is a key of config/drover.php, given its paths: as it is,
/// one key into an open map (`waits.drover:api`), or a pool's option under any pool or
/// environment name (`defaults.emails.timeout`, `environments.production.emails.timeout`).
fn config_key_exists(paths: &BTreeMap<String, String>, key: &str) -> bool {
    if paths.contains_key(key) {
        return true;
    }
    let parts: Vec<&str> = key.split('.').collect();
    let pool_option = |option: &str| paths.contains_key(&format!("defaults.default.{option}"));
    match parts.as_slice() {
        ["defaults", _] | ["environments", _] | ["environments", _, _] => true,
        ["defaults", _, option] | ["environments", _, _, option] => pool_option(option),
        _ => OPEN_MAPS.iter().any(|map| {
            key.strip_prefix(map)
                .and_then(|rest| rest.strip_prefix('.'))
                .is_some_and(|rest| !rest.contains('.'))
        }),
    }
}

/// The objects of drover's schema its migrations name (`drover.jobs`, `drover.enqueue`).
fn schema_objects(sql: &str) -> BTreeSet<String> {
    dotted_names(sql)
        .into_iter()
        .map(|(_, name)| name.split('.').nth(1).unwrap().to_string())
        .collect()
}

/// The fields of the JSON contract (`RunConfig` and the structs it holds: every field of a
/// `Deserialize` struct in src/config/mod.rs).
fn contract_fields(rust: &str) -> BTreeSet<String> {
    let mut fields = BTreeSet::new();
    let mut in_contract = false;
    for line in rust.lines() {
        let line = line.trim();
        if line.starts_with("#[derive(") {
            in_contract = line.contains("Deserialize");
        } else if line.starts_with("pub struct") || line.starts_with("pub enum") {
            in_contract &= line.starts_with("pub struct");
        } else if line == "}" {
            in_contract = false;
        } else if in_contract {
            if let Some(field) = line.strip_prefix("pub ").and_then(|l| l.split_once(':')) {
                if field.0.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                    fields.insert(field.0.to_string());
                }
            }
        }
    }
    fields
}

/// Whether the code reads environment variable `name`: it is written in a string or a unit's
/// line (`"DROVER_X"`, `'DROVER_X'`, `${DROVER_X}`, `$DROVER_X`, `Environment=DROVER_X=…`), not
/// only in a comment's prose.
fn code_reads(code: &[(String, String)], name: &str) -> bool {
    code.iter().any(|(_, text)| {
        text.match_indices(name).any(|(at, _)| {
            let before = text[..at].chars().next_back();
            let after = text[at + name.len()..].chars().next();
            before.is_some_and(|b| "\"'{$=".contains(b))
                && !after.is_some_and(|a| a.is_ascii_alphanumeric() || a == '_')
        })
    })
}

/// The drover binary's subcommands and their flags, from its own `--help`: built once.
struct BinaryHelp {
    subcommands: BTreeMap<String, Option<BTreeSet<String>>>,
}

impl BinaryHelp {
    fn new() -> Self {
        BinaryHelp {
            subcommands: BTreeMap::new(),
        }
    }

    /// The flags of `drover SUB` (from `drover SUB --help`), or None when there is no such
    /// subcommand.
    fn flags(&mut self, sub: &str) -> Option<&BTreeSet<String>> {
        self.subcommands
            .entry(sub.to_string())
            .or_insert_with(|| {
                let args = match sub {
                    "" => vec!["--help"],
                    sub => vec![sub, "--help"],
                };
                let out = std::process::Command::new(env!("CARGO_BIN_EXE_drover"))
                    .args(args)
                    .output()
                    .unwrap();
                out.status
                    .success()
                    .then(|| help_flags(&String::from_utf8_lossy(&out.stdout)))
            })
            .as_ref()
    }
}

/// The long flags a clap `--help` lists under "Options:".
fn help_flags(help: &str) -> BTreeSet<String> {
    let options = help.split("Options:").nth(1).unwrap_or("");
    options
        .lines()
        .filter_map(|line| {
            let line = line.trim_start();
            // `-h, --help`: the long form after the short one.
            let line = match line.strip_prefix('-') {
                Some(short) if !short.starts_with('-') => short.split_once(", ")?.1,
                _ => line,
            };
            flag_of(line.split_whitespace().next()?)
        })
        .collect()
}

/// What a doc's names are checked against, read from the code once.
struct Code {
    artisan: BTreeMap<String, BTreeSet<String>>,
    binary: BinaryHelp,
    env_code: Vec<(String, String)>,
    config: BTreeMap<String, String>,
    sections: BTreeSet<String>,
    schema: BTreeSet<String>,
    migrations: String,
    contract_only: BTreeSet<String>,
    units: BTreeSet<String>,
}

const ENV_CODE: &[&str] = &[
    "src",
    "broker/src",
    "supervisor/src",
    "scheduler/src",
    "php-client/src",
    "php-client/config",
    "php-client/bin",
    "dist",
    // The test harness's own (docs/laravel-compatibility.md names how to run the tests).
    "php-client/tests",
    "tests",
    "scripts",
];

impl Code {
    fn read() -> Code {
        let config = config_paths(&read("php-client/config/drover.php"));
        let sections = config
            .iter()
            .filter(|(k, v)| !k.contains('.') && *v == "[")
            .map(|(k, _)| k.clone())
            .collect();
        // The migrations, and the table that records them (broker/src/migrate.rs).
        let migrations: String = files_under(&["broker/migrations"])
            .into_iter()
            .map(|(_, text)| text)
            .chain([read("broker/src/migrate.rs")])
            .collect();
        let config_words: BTreeSet<&str> = config.keys().flat_map(|k| k.split('.')).collect();
        let contract_only = contract_fields(&read("src/config/mod.rs"))
            .into_iter()
            .filter(|f| f.contains('_') && !config_words.contains(f.as_str()))
            .collect();
        let units = files_under(&["dist"])
            .into_iter()
            .filter_map(|(path, _)| Some(path.rsplit('/').next()?.to_string()))
            .filter(|name| name.ends_with(".service"))
            .collect();
        Code {
            artisan: artisan_commands(),
            binary: BinaryHelp::new(),
            env_code: files_under(ENV_CODE),
            schema: schema_objects(&migrations),
            migrations,
            config,
            sections,
            contract_only,
            units,
        }
    }

    /// Whether `drover.x[.y]` names a key of config/drover.php or an object of the schema (and
    /// a column of it).
    fn dotted_exists(&self, name: &str) -> bool {
        let key = name.strip_prefix("drover.").unwrap();
        let first = key.split('.').next().unwrap();
        if config_key_exists(&self.config, key) {
            return true;
        }
        if !self.schema.contains(first) {
            return false;
        }
        key.split('.').skip(1).all(|column| {
            self.migrations.match_indices(column).any(|(at, _)| {
                let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
                !word(self.migrations[..at].chars().next_back())
                    && !word(self.migrations[at + column.len()..].chars().next())
            })
        })
    }

    /// Whether a unit named in a doc is one of dist/'s: an instance of the template, or a file.
    fn unit_exists(&self, name: &str) -> bool {
        match name.split_once('@') {
            Some(_) => self.units.contains("drover@.service"),
            None => self.units.contains(name),
        }
    }
}

/// Each doc's problems of one kind, as "doc:line: what".
fn names_of_docs(check: impl Fn(&str, &str, &mut Code) -> Vec<(usize, String)>) -> Vec<String> {
    let mut code = Code::read();
    let mut wrong = Vec::new();
    for doc in named_documents() {
        let text = read(&doc);
        for (at, problem) in check(&doc, &text, &mut code) {
            wrong.push(format!("{doc}:{}: {problem}", line_of(&text, at)));
        }
    }
    wrong
}

#[test]
fn every_command_and_flag_the_docs_name_exists() {
    let wrong = names_of_docs(|_, text, code| {
        let mut wrong = Vec::new();
        let registered = |name: &str| code.artisan.contains_key(name);
        for (at, name) in artisan_names(text) {
            if !registered(&name) {
                wrong.push((at, format!("`{name}` is not an artisan command of the package (the $signature of a command DroverServiceProvider registers)")));
            }
        }
        for (at, piece) in code_pieces(text) {
            for invocation in invocations(&piece) {
                match invocation {
                    Invocation::Artisan { name, flags } => {
                        let Some(options) = code.artisan.get(&name) else {
                            continue; // named above
                        };
                        for flag in flags {
                            if !options.contains(&flag)
                                && !ARTISAN_GLOBAL_OPTIONS.contains(&flag.as_str())
                            {
                                wrong.push((at, format!("`{name} --{flag}`: {name}'s $signature has no --{flag} (it has {options:?})")));
                            }
                        }
                    }
                    Invocation::Binary { sub, flags } => {
                        let command = format!("drover {sub}").trim_end().to_string();
                        match code.binary.flags(&sub) {
                            None => wrong.push((at, format!("`{command}`: the binary has no subcommand {sub} (`{command} --help` fails)"))),
                            Some(options) => {
                                for flag in flags {
                                    if !options.contains(&flag) {
                                        wrong.push((at, format!("`{command} --{flag}`: `{command} --help` lists no --{flag} (it lists {options:?})")));
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        for verb in LARAVEL_VERBS_OF_THE_PACKAGE {
            if text.contains(verb) && !registered(verb) {
                wrong.push((
                    text.find(verb).unwrap(),
                    format!(
                        "`{verb}` is said to be the package's, which registers no such command"
                    ),
                ));
            }
        }
        wrong
    });
    assert!(
        wrong.is_empty(),
        "commands and flags the docs name that the code does not have:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_package_registers_no_command_outside_its_namespace_the_docs_do_not_attribute_to_it() {
    let outside: Vec<String> = artisan_commands()
        .into_keys()
        .filter(|name| name != "drover" && !name.starts_with("drover:"))
        .filter(|name| !LARAVEL_VERBS_OF_THE_PACKAGE.contains(&name.as_str()))
        .collect();
    assert!(
        outside.is_empty(),
        "commands the package registers outside drover's namespace, missing from LARAVEL_VERBS_OF_THE_PACKAGE: {outside:?}"
    );
}

#[test]
fn every_environment_variable_the_docs_name_is_read_by_the_code() {
    let wrong = names_of_docs(|_, text, code| {
        env_names(text)
            .into_iter()
            .filter(|(_, name)| !code_reads(&code.env_code, name))
            .map(|(at, name)| {
                (
                    at,
                    format!(
                        "{name} is read nowhere in {} (in a string or a unit's line)",
                        ENV_CODE.join(", ")
                    ),
                )
            })
            .collect()
    });
    assert!(
        wrong.is_empty(),
        "environment variables the docs name that the code does not read:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_config_key_the_docs_name_exists() {
    let wrong = names_of_docs(|_, text, code| {
        let mut wrong = Vec::new();
        for (at, name) in dotted_names(text) {
            if !code.dotted_exists(&name) {
                wrong.push((at, format!("{name} is neither a key of php-client/config/drover.php nor an object (and column) of drover's schema (broker/migrations)")));
            }
        }
        let pieces = code_pieces(text);
        for (at, piece) in &pieces {
            if let Some(key) = section_key(piece, &code.sections) {
                if !config_key_exists(&code.config, &key) {
                    wrong.push((
                        *at,
                        format!("`{key}` is not a key of php-client/config/drover.php"),
                    ));
                }
            }
            // A field of the JSON contract that config/drover.php does not have is named as
            // the contract's (or `drover run`'s), never as a key of config/drover.php.
            if code.contract_only.contains(piece.as_str()) {
                let block = block_around(text, *at);
                let lower = block.to_lowercase();
                if !["contract", "json", "drover run", "--config"]
                    .iter()
                    .any(|w| lower.contains(w))
                {
                    wrong.push((*at, format!("`{piece}` is a field of the JSON contract (src/config/mod.rs), not a key of config/drover.php: name the key (config/drover.php's) or say it is the contract's")));
                }
            }
        }
        wrong
    });
    assert!(
        wrong.is_empty(),
        "config keys the docs name that the code does not have:\n{}",
        wrong.join("\n")
    );
}

/// The paragraph (or, in a table, the row) of `text` around byte `at`.
fn block_around(text: &str, at: usize) -> &str {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[at..].find('\n').map_or(text.len(), |i| at + i);
    if text[line_start..].starts_with('|') {
        return &text[line_start..line_end];
    }
    let start = text[..at].rfind("\n\n").map_or(0, |i| i + 2);
    let end = text[at..].find("\n\n").map_or(text.len(), |i| at + i);
    &text[start..end]
}

#[test]
fn every_unit_the_docs_name_is_in_dist() {
    let wrong = names_of_docs(|_, text, code| {
        unit_names(text)
            .into_iter()
            .filter(|(_, name)| !code.unit_exists(name))
            .map(|(at, name)| {
                (
                    at,
                    format!("{name} is no unit of dist/ (it has {:?})", code.units),
                )
            })
            .collect()
    });
    assert!(
        wrong.is_empty(),
        "units the docs name that dist/ does not have:\n{}",
        wrong.join("\n")
    );
}

// --- The scanners, on examples -----------------------------------------------------------------

#[test]
fn code_pieces_are_spans_and_fenced_lines_without_their_comments() {
    let text = "Run `drover status\n--json` now.\n\n```sh\ndrover run --workers 4  # four\n# drover nothing\n```\nA `lone and `ok`.\n";
    let pieces: Vec<String> = code_pieces(text).into_iter().map(|(_, p)| p).collect();
    assert_eq!(
        pieces,
        [
            "drover status --json",
            "drover run --workers 4",
            "",
            "lone and"
        ]
    );
    // Offsets hold past multi-byte characters.
    let text = "… `a` ```\n";
    assert_eq!(code_pieces(text), [(4, "a".to_string())]);
}

#[test]
fn invocations_are_commands_with_the_flags_written_after_them() {
    let binary = |sub: &str, flags: &[&str]| Invocation::Binary {
        sub: sub.into(),
        flags: flags.iter().map(|f| f.to_string()).collect(),
    };
    let artisan = |name: &str, flags: &[&str]| Invocation::Artisan {
        name: name.into(),
        flags: flags.iter().map(|f| f.to_string()).collect(),
    };
    assert_eq!(
        invocations("drover run --workers 4 --prefetch=4 -- php handler.php --not-this"),
        [binary("run", &["workers", "prefetch"])]
    );
    assert_eq!(
        invocations("ExecStart=/usr/bin/drover launch --user ${DROVER_USER} --app ${DROVER_APP}"),
        [binary("launch", &["user", "app"])]
    );
    assert_eq!(invocations("drover --version"), [binary("", &["version"])]);
    assert_eq!(
        invocations("php artisan drover --stop-when-empty && php artisan drover:status [--json]"),
        [
            artisan("drover", &["stop-when-empty"]),
            artisan("drover:status", &["json"])
        ]
    );
    assert_eq!(
        invocations("drover:pause --queue=drover:default --for=60"),
        [artisan("drover:pause", &["queue", "for"])]
    );
    assert_eq!(invocations("sudo drover status"), [binary("status", &[])]);
    // Not commands: a message's words, a variable's value, a queue, a package.
    for code in [
        "another drover master is already running",
        "DROVER_BINARY=/usr/bin/drover",
        "queue:pause drover:default",
        "composer require drover/laravel",
        "systemctl reload drover@myapp",
    ] {
        assert_eq!(invocations(code), [], "{code}");
    }
}

#[test]
fn artisan_names_are_commands_not_connection_queues() {
    let text = "`drover:status`, php artisan drover:pause --queue=drover:default; \
                'budgets' => ['drover:api' => 10], `queue:pause drover:default`, \
                `queue:monitor drover:default,drover:high`, drover:QUEUE, (drover:top)";
    let names: Vec<String> = artisan_names(text).into_iter().map(|(_, n)| n).collect();
    assert_eq!(names, ["drover:status", "drover:pause", "drover:top"]);
}

#[test]
fn environment_variables_are_whole_names_not_patterns() {
    let text = "DROVER_USER=www-data, ${DROVER_APP}, `DROVER_*`, MY_DROVER_X, DROVER_LOG_JSON=1.";
    let names: Vec<String> = env_names(text).into_iter().map(|(_, n)| n).collect();
    assert_eq!(names, ["DROVER_USER", "DROVER_APP", "DROVER_LOG_JSON"]);
    let code = vec![(
        "a.php".to_string(),
        "env('DROVER_USER'); // DROVER_APP in prose\nExecStart=x ${DROVER_LOG}".to_string(),
    )];
    assert!(code_reads(&code, "DROVER_USER"));
    assert!(code_reads(&code, "DROVER_LOG"));
    assert!(
        !code_reads(&code, "DROVER_APP"),
        "a comment's mention is no read"
    );
    assert!(!code_reads(&code, "DROVER_US"), "a prefix is not the name");
}

#[test]
fn dotted_names_are_keys_and_schema_objects_not_files_or_paths() {
    let text = "drover.metrics.trim and `drover.jobs`; config/drover.php, drover.service, \
                storage/drover.root-owned, https://x/drover.git, drover.limit_*, in drover.nodes.";
    let names: Vec<String> = dotted_names(text).into_iter().map(|(_, n)| n).collect();
    assert_eq!(
        names,
        ["drover.metrics.trim", "drover.jobs", "drover.nodes"]
    );
    let sections: BTreeSet<String> = ["metrics".to_string()].into();
    assert_eq!(
        section_key("metrics.trim", &sections),
        Some("metrics.trim".into())
    );
    assert_eq!(section_key("metrics.md", &sections), None);
    assert_eq!(section_key("nodes.release", &sections), None);
}

#[test]
fn config_paths_follow_the_nesting_of_a_php_config() {
    let php = "<?php\n// 'commented' => 1,\nreturn [\n    'lease' => 30, # seconds\n    'binary' => env('DROVER_BINARY'),\n    /* 'gone' => [] */\n    'metrics' => [\n        'trim' => 1440,\n        'list' => ['a', 'b'],\n    ],\n    'waits' => ['drover:default' => 60],\n    'defaults' => ['default' => ['timeout' => 60]],\n];\n";
    let paths = config_paths(php);
    let keys: Vec<&str> = paths.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "binary",
            "defaults",
            "defaults.default",
            "defaults.default.timeout",
            "lease",
            "metrics",
            "metrics.list",
            "metrics.trim",
            "waits",
            "waits.drover:default"
        ]
    );
    assert_eq!(paths["lease"], "30");
    assert_eq!(paths["metrics"], "[");
    assert!(config_key_exists(&paths, "metrics.trim"));
    assert!(!config_key_exists(&paths, "metrics_trim"));
    assert!(!config_key_exists(&paths, "database.url"));
    assert!(
        config_key_exists(&paths, "waits.drover:api"),
        "a queue of an open map"
    );
    assert!(
        config_key_exists(&paths, "defaults.emails.timeout"),
        "any pool's option"
    );
    assert!(config_key_exists(
        &paths,
        "environments.production.emails.timeout"
    ));
    assert!(!config_key_exists(&paths, "defaults.emails.timeouts"));
}

#[test]
fn signatures_give_a_command_and_its_options() {
    let php = "protected $signature = 'drover:import-supervisor\n        {files?* : default: ' . self::DEFAULT_FILES . ')}\n        {--connection=* : only these}\n        {--F|force : overwrite}\n        {--dry-run : print, don\\'t write}';";
    let at = php.find("= '").unwrap() + 3;
    let (name, options) = parse_signature(&php_single_quoted(&php[at..]));
    assert_eq!(name, "drover:import-supervisor");
    let options: Vec<&str> = options.iter().map(String::as_str).collect();
    assert_eq!(options, ["connection", "dry-run", "force"]);
}

#[test]
fn contract_fields_are_those_of_deserialized_structs() {
    let rust = "#[derive(Debug, Deserialize)]\npub struct RunConfig {\n    /// Doc.\n    pub metrics_trim: u64,\n    pub pools: Vec<PoolSpec>,\n}\n#[derive(Debug)]\npub struct Status {\n    pub exit_code: i32,\n}\n";
    let fields: Vec<String> = contract_fields(rust).into_iter().collect();
    assert_eq!(fields, ["metrics_trim", "pools"]);
}

#[test]
fn unit_names_are_drovers_units() {
    let text = "drover@.service, `drover@myapp`, dist/drover.service, drover-bench, drover@%i, drover.services";
    let names: Vec<String> = unit_names(text).into_iter().map(|(_, n)| n).collect();
    assert_eq!(
        names,
        [
            "drover@.service",
            "drover@myapp",
            "drover.service",
            "drover@%i"
        ]
    );
}

#[test]
fn help_flags_are_the_long_options_clap_lists() {
    let help = "Usage: drover status [OPTIONS]\n\nOptions:\n      --state-dir <STATE_DIR>  [env: DROVER_STATE_DIR=] (else, --not-this)\n  -h, --help                   Print help, --nor-this\n";
    let flags: Vec<String> = help_flags(help).into_iter().collect();
    assert_eq!(flags, ["help", "state-dir"]);
}

// ---------------------------------------------------------------------------------------------
// Facts said in several places, said the same everywhere (issue 57: the docs disagreed).
// ---------------------------------------------------------------------------------------------

/// `drover status`'s exit codes, as src/rules/health.rs and src/main.rs give them.
const STATUS_EXIT_CODES: &[&str] = &[
    "0 serving",
    "1 paused",
    "2 no master",
    "3 degraded",
    "4 permission denied",
    "5 database unreachable",
];

/// Each list of status exit codes in `text` (from "0 WORD, 1 paused" to the end of its sentence
/// or table cell), its parentheses left out, with its byte.
fn exit_code_lists(text: &str) -> Vec<(usize, String)> {
    let mut lists = Vec::new();
    for (at, _) in text.match_indices("0 ") {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|b| b.is_alphanumeric() || b == '.' || b == '–') {
            continue;
        }
        let rest = &text[at + 2..];
        let word = rest.split([',', ' ']).next().unwrap_or("");
        if !rest[word.len()..].starts_with(", 1 paused") {
            continue;
        }
        let mut list = String::new();
        let mut depth = 0;
        let rest = &text[at..];
        let paragraph = &rest[..rest.find("\n\n").unwrap_or(rest.len())];
        for c in paragraph.chars() {
            match c {
                '(' => depth += 1,
                ')' if depth == 0 => break,
                ')' => depth -= 1,
                '.' | ';' | '|' if depth == 0 => break,
                c if depth == 0 => list.push(c),
                _ => {}
            }
        }
        lists.push((at, squash(&list)));
    }
    lists
}

/// Whether a list says every exit code, in order, and nothing else.
fn says_every_exit_code(list: &str) -> bool {
    let items: Vec<&str> = list
        .split(',')
        .map(|item| item.trim().trim_start_matches("and ").trim())
        .filter(|item| !item.is_empty())
        .collect();
    items == STATUS_EXIT_CODES
}

#[test]
fn the_exit_code_scanner_finds_lists_and_reads_them_whole() {
    let text = "exits 0 serving, 1 paused, 2 no master, 3 degraded (a circuit open, a pool), 4 permission denied, 5 database unreachable. Then 0 running, 1 paused, 2 not running | 10 ms";
    let lists = exit_code_lists(text);
    assert_eq!(lists.len(), 2);
    assert!(says_every_exit_code(&lists[0].1), "{:?}", lists[0]);
    assert!(!says_every_exit_code(&lists[1].1), "{:?}", lists[1]);
}

#[test]
fn every_list_of_status_exit_codes_says_all_six() {
    let mut wrong = Vec::new();
    let mut found = 0;
    for doc in named_documents() {
        let text = read(&doc);
        for (at, list) in exit_code_lists(&text) {
            found += 1;
            if !says_every_exit_code(&list) {
                wrong.push(format!("{doc}:{}: \"{list}\"", line_of(&text, at)));
            }
        }
    }
    let help = std::process::Command::new(env!("CARGO_BIN_EXE_drover"))
        .args(["status", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout).into_owned();
    for (_, list) in exit_code_lists(&help) {
        found += 1;
        if !says_every_exit_code(&list) {
            wrong.push(format!("drover status --help: \"{list}\""));
        }
    }
    assert!(found >= 4, "only {found} lists of exit codes found");
    assert!(
        wrong.is_empty(),
        "lists of drover status's exit codes that are not {}:\n{}",
        STATUS_EXIT_CODES.join(", "),
        wrong.join("\n")
    );
}

/// The sentences of `text` (its comment marks and backticks left out, white space squashed).
fn sentences(text: &str) -> Vec<String> {
    let plain: String = text
        .lines()
        .map(|l| {
            l.trim_start()
                .trim_start_matches('#')
                .trim_start_matches("//")
        })
        .collect::<Vec<_>>()
        .join(" ")
        .replace('`', "");
    squash(&plain)
        .split(". ")
        .flat_map(|s| s.split(" | "))
        .map(str::to_string)
        .collect()
}

/// How long to give a stopping master, said once: the shutdown grace, then up to 10 s for
/// settles a database that just went away has not taken (`SETTLE_WAIT_AT_EXIT`).
const TIMEOUT_STOP_ADVICE: &str = "shutdown_grace + 10 s";

#[test]
fn every_timeoutstopsec_advice_is_the_same() {
    let wait = read("src/master/mod.rs");
    assert!(
        wait.contains("pub const SETTLE_WAIT_AT_EXIT: Duration = Duration::from_secs(10);"),
        "SETTLE_WAIT_AT_EXIT changed: update TIMEOUT_STOP_ADVICE and every doc that gives it"
    );
    let mut files = named_documents();
    files.extend([
        "dist/drover.service".to_string(),
        "dist/debian/drover@.service".to_string(),
        "php-client/src/Config/SupervisorImporter.php".to_string(),
    ]);
    let mut advice = 0;
    let mut wrong = Vec::new();
    for file in files {
        for sentence in sentences(&read(&file)) {
            if sentence.contains("TimeoutStopSec") && sentence.contains("above") {
                advice += 1;
                if !sentence.contains(TIMEOUT_STOP_ADVICE) {
                    wrong.push(format!("{file}: \"{sentence}\""));
                }
            }
        }
    }
    assert!(advice >= 5, "only {advice} pieces of advice found");
    assert!(
        wrong.is_empty(),
        "advice on TimeoutStopSec that does not say \"above {TIMEOUT_STOP_ADVICE}\":\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_page_that_says_what_an_outage_does_to_a_running_job_gives_the_same_window() {
    use drover::rules::lease_deadlines::killed_into_outage;
    use std::time::Duration;
    let config = config_paths(&read("php-client/config/drover.php"));
    let seconds = |key: &str| -> u64 { config[key].parse().unwrap() };
    let (earliest, latest) = killed_into_outage(
        Duration::from_secs(seconds("lease")),
        Duration::from_secs(seconds("defaults.default.outage_grace")),
    );
    let window = format!(
        "{}–{} s into the outage",
        earliest.as_secs(),
        latest.as_secs()
    );
    let mut wrong = Vec::new();
    for doc in named_documents() {
        let text = squash(&read(&doc));
        for (at, _) in text.match_indices(" s into the outage") {
            let start = text[..at].rfind(' ').map_or(0, |i| i + 1);
            let said = text[start..at + " s into the outage".len()]
                .trim_start_matches(|c: char| !c.is_ascii_digit());
            if said != window {
                wrong.push(format!("{doc}: \"{said}\""));
            }
        }
    }
    // The four pages a team reads for an outage say it.
    for doc in [
        "docs/guide.md",
        "docs/leases.md",
        "docs/operations.md",
        "docs/deploy.md",
    ] {
        if !squash(&read(doc)).contains(&window) {
            wrong.push(format!("{doc}: does not say \"{window}\""));
        }
    }
    assert!(
        wrong.is_empty(),
        "with the default lease and outage grace a running job is stopped {window} \
         (rules::lease_deadlines::killed_into_outage):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn a_sentence_that_gates_actions_names_the_operate_gate() {
    let routes = read("php-client/routes/web.php");
    // The routes' own rule: every POST is behind AuthorizeOperate.
    for line in routes.lines().filter(|l| l.contains("Route::post(")) {
        assert!(
            line.contains("AuthorizeOperate"),
            "a POST route without the operateDrover gate: {line}"
        );
    }
    let mut wrong = Vec::new();
    for doc in named_documents() {
        for sentence in sentences(&read(&doc)) {
            let lower = sentence.to_lowercase();
            if sentence.contains("viewDrover")
                && lower.contains("action")
                && !sentence.contains("operateDrover")
            {
                wrong.push(format!("{doc}: \"{sentence}\""));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "sentences that gate the dashboard's actions with viewDrover alone (every action takes operateDrover, php-client/routes/web.php):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_cli_page_lists_every_flag_of_drover_run_and_no_other() {
    let page = read("docs/cli.md");
    let section = &page[page.find("## `drover run`").unwrap()..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let listed: BTreeSet<String> = section
        .lines()
        .filter_map(|line| line.strip_prefix("| `--"))
        .filter_map(|rest| flag_of(&format!("--{rest}")))
        .collect();
    let mut binary = BinaryHelp::new();
    let mut has = binary.flags("run").unwrap().clone();
    has.remove("help");
    assert_eq!(
        listed, has,
        "docs/cli.md's table of `drover run` and `drover run --help` differ"
    );
}

#[test]
fn the_readme_starts_with_the_two_commands_stays_short_and_lists_every_page() {
    let readme = read("README.md");
    let start: Vec<&str> = readme.lines().take(5).collect();
    assert_eq!(start[0], "# drover");
    assert!(start[3].starts_with("bash ./scripts/demo"), "{start:?}");
    assert!(start[4].starts_with("bash ./scripts/test"), "{start:?}");
    assert!(
        readme.contains("Both work as root on a fresh Debian 12 machine"),
        "the README no longer says both commands work as root on a fresh Debian 12 machine"
    );
    let words = readme.split_whitespace().count();
    assert!(
        words < 1200,
        "README.md has {words} words: a newcomer's page stays under 1,200 (the detail goes to docs/)"
    );
    let listed = link_targets(&readme);
    let missing: Vec<String> = named_documents()
        .into_iter()
        .filter(|doc| doc.starts_with("docs/"))
        .filter(|doc| !listed.contains(doc))
        .collect();
    assert!(
        missing.is_empty(),
        "pages of docs/ missing from the README's reading order (a line each): {missing:?}"
    );
}

#[test]
fn every_config_key_the_code_names_exists() {
    // Messages and comments name keys too (an error once named `drover.database.url`). In the
    // code `drover.x` is also a route's or a session's name: only names under a key of
    // config/drover.php are checked.
    let code = Code::read();
    let mut wrong = Vec::new();
    let mut checked = 0;
    let dirs = [
        "src",
        "broker/src",
        "supervisor/src",
        "php-client/src",
        "php-client/config",
        "dist",
    ];
    for (path, text) in files_under(&dirs) {
        for (at, name) in dotted_names(&text) {
            let first = name.split('.').nth(1).unwrap();
            if !code.config.contains_key(first) {
                continue;
            }
            checked += 1;
            if !code.dotted_exists(&name) {
                wrong.push(format!("{path}:{}: {name}", line_of(&text, at)));
            }
        }
    }
    assert!(checked > 100, "only {checked} names found in the code");
    assert!(
        wrong.is_empty(),
        "names of the form drover.x.y in the code that are neither a key of php-client/config/drover.php nor an object of drover's schema:\n{}",
        wrong.join("\n")
    );
}

/// The fields of `pub struct NAME { … }` in `rust`: each line `name: Type,` at the struct's
/// own depth (doc comments and attributes aside).
fn struct_fields(rust: &str, name: &str) -> Vec<String> {
    let start = rust
        .find(&format!("pub struct {name} {{"))
        .unwrap_or_else(|| panic!("no `pub struct {name}`"));
    let body = &rust[start..];
    let end = body.find("\n}").expect("the struct's end");
    body[..end]
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|l| !l.starts_with("//") && !l.starts_with('#'))
        .filter_map(|l| l.split_once(':').map(|(field, _)| field.trim().to_string()))
        .filter(|f| !f.is_empty() && f.chars().all(|c| c.is_ascii_lowercase() || c == '_'))
        .collect()
}

#[test]
fn the_masters_field_count_docs_architecture_states_is_the_codes() {
    let fields = struct_fields(&read("src/master/mod.rs"), "Master");
    let doc = squash(&read("docs/architecture.md"));
    let words = [
        "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
        "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
    ];
    let stated = words
        .iter()
        .position(|w| doc.contains(&format!("parts and nothing else ({w} fields")))
        .map(|i| i + 1)
        .expect("docs/architecture.md states how many fields `Master` has (\"parts and nothing else (N fields\")");
    assert_eq!(
        stated,
        fields.len(),
        "docs/architecture.md says `Master` has {stated} fields; src/master/mod.rs has {}: {fields:?}",
        fields.len()
    );
    assert!(
        fields.len() <= 12,
        "`Master` keeps only its parts, at most 12: {fields:?}"
    );
}
