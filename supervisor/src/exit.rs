//! How a process ended, in words ([`describe_exit`]): the one wording of an exit status, for a
//! worker's or a zygote's — started or adopted — in the supervisor's reports and the master's logs.

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
