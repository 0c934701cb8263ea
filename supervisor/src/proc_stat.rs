//! A process as `/proc/<pid>/stat` describes it: the fields the supervisor decides by (who is a
//! stray to reap, whether a PID a zygote reported is a fork it made), read in one place.

/// The fields of `/proc/<pid>/stat` the supervisor reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub pid: u32,
    /// `Z` for a zombie.
    pub state: char,
    pub ppid: u32,
    pub pgrp: u32,
    pub session: u32,
    /// When it started, in clock ticks since boot (compare with [`boot_ticks_now`]).
    pub start_ticks: u64,
}

impl Stat {
    /// Parses a stat line; the command name (in parentheses, possibly with spaces and parentheses)
    /// is skipped up to its last `)`.
    pub fn parse(line: &str) -> Option<Stat> {
        let (head, rest) = line.rsplit_once(')')?;
        let pid = head.split_whitespace().next()?.parse().ok()?;
        // After the command: state ppid pgrp session tty tpgid flags minflt cminflt majflt
        // cmajflt utime stime cutime cstime priority nice threads itrealvalue starttime.
        let fields: Vec<&str> = rest.split_whitespace().collect();
        Some(Stat {
            pid,
            state: fields.first()?.chars().next()?,
            ppid: fields.get(1)?.parse().ok()?,
            pgrp: fields.get(2)?.parse().ok()?,
            session: fields.get(3)?.parse().ok()?,
            start_ticks: fields.get(19)?.parse().ok()?,
        })
    }

    /// The process `pid` (a number, or `self`), if it exists.
    pub fn read(pid: &str) -> Option<Stat> {
        Stat::parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }
}

/// Clock ticks since boot now, as `/proc/<pid>/stat` counts a start time.
pub fn boot_ticks_now() -> u64 {
    let ticks = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .unwrap_or(100) as u64;
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)
        .map(|t| t.tv_sec() as u64 * ticks + t.tv_nsec() as u64 * ticks / 1_000_000_000)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_stat_line_whose_command_has_spaces_and_parentheses() {
        let line =
            "4242 (php (worker) x) Z 100 4000 90 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0";
        assert_eq!(
            Stat::parse(line),
            Some(Stat {
                pid: 4242,
                state: 'Z',
                ppid: 100,
                pgrp: 4000,
                session: 90,
                start_ticks: 777,
            })
        );
        assert_eq!(Stat::parse("garbage"), None);
    }

    #[test]
    fn this_process_started_before_now() {
        let me = Stat::read("self").unwrap();
        assert_eq!(me.pid, std::process::id());
        assert!(me.start_ticks <= boot_ticks_now());
    }
}
