//! What a run's process said and how it ended, into the history's words.
//!
//! The run (`php artisan drover:schedule-run`, `php-client/src/Schedule/ScheduledRun.php`) prints
//! its outcome as its last line of JSON: succeeded, failed, skipped (Laravel's rules said no at
//! run time) or started (handed to the background). A process that ends without that line — it
//! was killed, it crashed, PHP could not start — failed, and its exit says how.

use serde::Deserialize;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutcomeKind {
    Succeeded,
    Failed,
    Skipped,
    Started,
}

/// A run's outcome for the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub kind: OutcomeKind,
    /// Why it was skipped or failed, in words.
    pub reason: Option<String>,
    /// The command's exit code, when it ran one.
    pub exit_code: Option<i32>,
    /// The end of its output: the command's output file's, else the process's own.
    pub output_tail: Option<String>,
}

/// At most this much output is kept, from its end.
pub const OUTPUT_TAIL: usize = 4096;

#[derive(Deserialize)]
struct Line {
    drover_schedule_run: u64,
    outcome: String,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    exit_code: Option<i64>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    output_tail: Option<String>,
}

/// The last `max` bytes of `text`, cut at a character boundary.
pub fn tail(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}

/// The outcome of a run whose process printed `stdout` (and `stderr`) and ended so: `exit` is
/// its exit code, or `None` when a signal ended it (`signal` names it).
pub fn from_process(
    stdout: &str,
    stderr: &str,
    exit: Option<i32>,
    signal: Option<&str>,
) -> Outcome {
    let (said, before) = match stdout.trim_end().rsplit_once('\n') {
        Some((before, last)) => (parse(last), before),
        None => (parse(stdout.trim_end()), ""),
    };
    // The process's own output: what it printed before the outcome line, then its stderr.
    let process_output = || joined(before, stderr);
    match said {
        Some(line) => {
            let kind = match line.outcome.as_str() {
                "succeeded" => OutcomeKind::Succeeded,
                "skipped" => OutcomeKind::Skipped,
                "started" => OutcomeKind::Started,
                _ => OutcomeKind::Failed,
            };
            let reason = match (line.reason, line.error) {
                (Some(r), Some(e)) => Some(format!("{r}: {e}")),
                (r, e) => r.or(e),
            };
            Outcome {
                kind,
                reason,
                exit_code: line.exit_code.and_then(|c| i32::try_from(c).ok()),
                output_tail: line
                    .output_tail
                    .filter(|t| !t.is_empty())
                    .map(|t| tail(&t, OUTPUT_TAIL).to_string())
                    .or_else(process_output),
            }
        }
        None => Outcome {
            kind: OutcomeKind::Failed,
            reason: Some(match (exit, signal) {
                (_, Some(signal)) => {
                    format!("its process was ended by {signal} before it said how the task ended")
                }
                (Some(code), None) => {
                    format!("its process exited with code {code} before it said how the task ended")
                }
                (None, None) => "its process ended before it said how the task ended".to_string(),
            }),
            exit_code: None,
            output_tail: joined(stdout, stderr),
        },
    }
}

/// `stdout` then `stderr`, trimmed, at most [`OUTPUT_TAIL`] from the end; `None` when both are
/// empty.
fn joined(stdout: &str, stderr: &str) -> Option<String> {
    let mut text = String::from(stdout.trim_end());
    if !stderr.trim().is_empty() {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(stderr.trim_end());
    }
    (!text.is_empty()).then(|| tail(&text, OUTPUT_TAIL).to_string())
}

fn parse(line: &str) -> Option<Line> {
    serde_json::from_str::<Line>(line.trim())
        .ok()
        .filter(|l| l.drover_schedule_run == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_line_says_how_the_run_ended() {
        let o = from_process(
            "hello from the closure\n{\"drover_schedule_run\":1,\"outcome\":\"succeeded\",\"reason\":null,\"exit_code\":0,\"error\":null,\"output_tail\":null}\n",
            "",
            Some(0),
            None,
        );
        assert_eq!(o.kind, OutcomeKind::Succeeded);
        assert_eq!(o.exit_code, Some(0));
        assert_eq!(o.output_tail.as_deref(), Some("hello from the closure"));

        let o = from_process(
            "{\"drover_schedule_run\":1,\"outcome\":\"failed\",\"exit_code\":3,\"error\":\"Exception: Scheduled command [x] failed with exit code [3].\",\"output_tail\":\"boom\\n\"}",
            "",
            Some(1),
            None,
        );
        assert_eq!(o.kind, OutcomeKind::Failed);
        assert_eq!(o.exit_code, Some(3));
        assert!(o.reason.unwrap().contains("exit code [3]"));
        assert_eq!(o.output_tail.as_deref(), Some("boom\n"));

        let o = from_process(
            "{\"drover_schedule_run\":1,\"outcome\":\"skipped\",\"reason\":\"its filters (when, skip, between) said no\"}",
            "",
            Some(0),
            None,
        );
        assert_eq!(o.kind, OutcomeKind::Skipped);
        assert!(o.reason.unwrap().contains("filters"));
    }

    #[test]
    fn a_process_that_ends_without_saying_failed_and_its_exit_says_how() {
        let o = from_process(
            "half a line",
            "PHP Fatal error: out of memory",
            Some(255),
            None,
        );
        assert_eq!(o.kind, OutcomeKind::Failed);
        assert!(o.reason.as_deref().unwrap().contains("code 255"));
        assert_eq!(
            o.output_tail.as_deref(),
            Some("half a line\nPHP Fatal error: out of memory")
        );
        let o = from_process("", "", None, Some("SIGKILL"));
        assert!(o.reason.unwrap().contains("SIGKILL"));
        assert_eq!(o.output_tail, None);
    }

    #[test]
    fn the_tail_is_cut_at_a_character_boundary() {
        let text = "é".repeat(3000);
        let t = tail(&text, OUTPUT_TAIL);
        assert!(t.len() <= OUTPUT_TAIL && t.len() >= OUTPUT_TAIL - 1);
        assert!(t.chars().all(|c| c == 'é'));
    }
}
