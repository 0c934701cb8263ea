//! A process's memory as `/proc` tells it: RSS (a counter the kernel keeps, cheap) and PSS (a walk
//! of its page tables).

/// A process's resident set size, KiB, from `/proc/<pid>/statm` (cheap: a counter).
pub fn read_rss_kib(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/statm")).ok()?;
    let pages: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf only reads a constant.
    let page = unsafe { nix::libc::sysconf(nix::libc::_SC_PAGESIZE) };
    pages.checked_mul(page.max(4096) as u64).map(|b| b / 1024)
}

/// A process's proportional set size, KiB, from `/proc/<pid>/smaps_rollup`.
pub fn read_pss_kib(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("Pss:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_resident_size_and_a_pss_and_a_gone_one_none() {
        let me = std::process::id();
        assert!(read_rss_kib(me).is_some_and(|k| k > 0));
        assert!(read_pss_kib(me).is_some_and(|k| k > 0));
        assert_eq!(read_rss_kib(u32::MAX), None);
        assert_eq!(read_pss_kib(u32::MAX), None);
    }
}
