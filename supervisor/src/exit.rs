//! How a process ended: in words ([`describe_exit`]), the one wording of an exit status, for a
//! worker's or a zygote's — started or adopted — in the supervisor's reports and the master's logs;
//! and whether a worker meant to leave ([`meant`]).

/// How a process ended, in words: `exited with code 1`, `was killed by SIGSEGV`.
pub fn describe_exit(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with code {code}"),
        (_, Some(sig)) => format!(
            "was killed by {}",
            nix::sys::signal::Signal::try_from(sig)
                .map(|s| s.as_str())
                .unwrap_or("an unknown signal")
        ),
        _ => format!("ended ({status})"),
    }
}

/// Whether a worker's exit status says it left on purpose: code 0 (its own `max_jobs` or
/// `max_time`, `queue:restart`, a stop) or 12 (Laravel's memory limit). Anything else — another
/// code, a signal, an unknown status — is a crash unless the pool asked for it
/// ([`crate::Pool::on_exit`] decides, with this as one of its facts).
pub fn meant(status: Option<std::process::ExitStatus>) -> bool {
    matches!(status.and_then(|s| s.code()), Some(0) | Some(12))
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;

    use super::*;

    #[test]
    fn a_worker_means_to_leave_with_code_0_or_laravels_12_and_nothing_else() {
        let code = |c: i32| Some(ExitStatus::from_raw(c << 8));
        assert!(meant(code(0)));
        assert!(meant(code(12)));
        assert!(!meant(code(1)));
        assert!(!meant(code(255)));
        // Killed by SIGKILL (9): a crash, whoever sent it.
        assert!(!meant(Some(ExitStatus::from_raw(9))));
        assert!(!meant(None));
    }
}
