//! The master as a child subreaper ([`become_subreaper`], fork mode): its orphaned descendants
//! become its children instead of init's. That is how it adopts the workers a zygote forks
//! ([`crate::adopted`]), and why it must reap the other orphans it inherits ([`crate::strays`]).

/// Makes this process the reaper of its orphaned descendants (`PR_SET_CHILD_SUBREAPER`): a
/// worker forked by a zygote becomes the master's child when the zygote's middle process exits.
pub fn become_subreaper() -> std::io::Result<()> {
    // SAFETY: prctl with an integer option and argument.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
