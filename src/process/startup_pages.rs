//! Hands back to the kernel the memory only start-up used, once the master serves.
//!
//! Start-up (reading the configuration, connecting with TLS, checking the schema, starting the
//! pools) runs code and builds data that the steady state never touches again, and those pages
//! stay resident and count in the master's PSS for its whole life. Once, a moment after the
//! workers are up, the master:
//! - frees the heap pages start-up freed but glibc kept (`malloc_trim`);
//! - drops the main thread's stack pages below what the loop uses (the runtime is
//!   single-threaded, so nothing lives below the current frame);
//! - pages out the binary's own code and read-only data that only this process maps: what the
//!   steady state runs again comes back from the page cache or the file, once.
//!
//! None of this changes behaviour; a page needed again is faulted back in. Measured in
//! bench/notes.md ("The master's PSS, the durability trades as engines").

use std::fs;

/// How much of the stack below the caller's frame is kept as it is, for the loop's deeper calls.
const STACK_KEPT: usize = 32 * 1024;

/// What was handed back, in KiB of resident memory before and after (`VmRSS`), for the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Released {
    pub rss_before_kib: u64,
    pub rss_after_kib: u64,
}

/// Hands back start-up's pages (see the module doc). Linux only; a step the kernel refuses
/// (an older kernel without `MADV_PAGEOUT`) is skipped.
pub fn release() -> Released {
    let rss_before_kib = rss_kib();
    let maps = fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let exe = fs::read_link("/proc/self/exe").ok();
    // SAFETY: malloc_trim only returns free memory to the kernel.
    unsafe { libc::malloc_trim(0) };
    let page = page_size();
    for line in maps.lines() {
        let Some(mapping) = Mapping::parse(line) else {
            continue;
        };
        if mapping.path == "[stack]" {
            // Only when called on the main thread (the master's single-threaded runtime): a
            // frame on another thread's stack says nothing about where the main one's ends.
            let here = &mapping as *const Mapping as usize;
            if !(mapping.start..mapping.end).contains(&here) {
                continue;
            }
            let keep_from = here.saturating_sub(STACK_KEPT) & !(page - 1);
            if keep_from > mapping.start {
                // SAFETY: the range lies within the main thread's stack, STACK_KEPT below the
                // current frame, on the thread that runs; nothing live is below the frame, and
                // a page touched again is a fresh zero page.
                unsafe {
                    libc::madvise(
                        mapping.start as *mut libc::c_void,
                        keep_from - mapping.start,
                        libc::MADV_DONTNEED,
                    )
                };
            }
        } else if !mapping.writable
            && exe
                .as_deref()
                .is_some_and(|e| e.as_os_str() == mapping.path)
        {
            // SAFETY: advice on the process's own read-only file mappings; pages come back on
            // their next use.
            unsafe {
                libc::madvise(
                    mapping.start as *mut libc::c_void,
                    mapping.end - mapping.start,
                    libc::MADV_PAGEOUT,
                )
            };
        }
    }
    Released {
        rss_before_kib,
        rss_after_kib: rss_kib(),
    }
}

/// One line of `/proc/self/maps`.
struct Mapping<'a> {
    start: usize,
    end: usize,
    writable: bool,
    path: &'a str,
}

impl<'a> Mapping<'a> {
    fn parse(line: &'a str) -> Option<Mapping<'a>> {
        let mut fields = line.split_whitespace();
        let (start, end) = fields.next()?.split_once('-')?;
        let perms = fields.next()?;
        let path = fields.nth(3).unwrap_or("");
        Some(Mapping {
            start: usize::from_str_radix(start, 16).ok()?,
            end: usize::from_str_radix(end, 16).ok()?,
            writable: perms.as_bytes().get(1) == Some(&b'w'),
            path,
        })
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n)
        .ok()
        .filter(|n| n.is_power_of_two())
        .unwrap_or(4096)
}

fn rss_kib() -> u64 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_process_holds_is_unchanged_after_its_pages_go_back() {
        let kept: Vec<u64> = (0..100_000).collect();
        let on_stack = std::hint::black_box([7u8; 16 * 1024]);
        let freed: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 64 * 1024]).collect();
        drop(freed);
        // What it saves is measured under load (bench/notes.md); a process's RSS around one call
        // also moves with what the call itself reads and faults in (CI at f7915f8 saw 5,216 KiB
        // before, 5,400 after), so the test holds it to what it must never do: lose live data.
        let r = release();
        assert!(r.rss_before_kib > 0, "VmRSS read: {r:?}");
        assert!(kept.iter().enumerate().all(|(i, &v)| v == i as u64));
        assert!(std::hint::black_box(&on_stack).iter().all(|&b| b == 7));
        // The code paged out comes back on its next call: this one.
        assert!(release().rss_before_kib > 0);
    }

    #[test]
    fn maps_lines_parse_with_and_without_a_path() {
        let m = Mapping::parse("00400000-00452000 r-xp 00000000 08:02 173521 /bin/x").unwrap();
        assert_eq!(
            (m.start, m.end, m.writable, m.path),
            (0x400000, 0x452000, false, "/bin/x")
        );
        let m = Mapping::parse("7ffd1000-7ffd2000 rw-p 00000000 00:00 0").unwrap();
        assert!(m.writable);
        assert_eq!(m.path, "");
        assert!(Mapping::parse("garbage").is_none());
    }
}
