//! The signals the master answers, installed once, first thing: a SIGHUP or SIGUSR2 that
//! arrives while the master is still starting (connecting to the database, starting the embedded
//! cluster) is then queued for the loop instead of killing the process by its default action.
//!
//! | signal | meaning |
//! |---|---|
//! | TERM, INT | graceful shutdown (a second one: immediate) |
//! | QUIT | immediate shutdown |
//! | HUP | reload |
//! | USR2 | pause |
//! | CONT | continue |

use tokio::signal::unix::{signal, Signal, SignalKind};

/// A signal the master acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sig {
    Terminate,
    Interrupt,
    Quit,
    Hangup,
    Pause,
    Continue,
}

impl Sig {
    pub fn name(self) -> &'static str {
        match self {
            Sig::Terminate => "SIGTERM",
            Sig::Interrupt => "SIGINT",
            Sig::Quit => "SIGQUIT",
            Sig::Hangup => "SIGHUP",
            Sig::Pause => "SIGUSR2",
            Sig::Continue => "SIGCONT",
        }
    }
}

/// The installed handlers; each delivery is read once, in order of the select below.
pub struct Signals {
    term: Signal,
    int: Signal,
    quit: Signal,
    hup: Signal,
    usr2: Signal,
    cont: Signal,
}

impl Signals {
    /// Replaces the default actions of all six signals for the rest of the process's life.
    pub fn install() -> std::io::Result<Signals> {
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            quit: signal(SignalKind::quit())?,
            hup: signal(SignalKind::hangup())?,
            usr2: signal(SignalKind::user_defined2())?,
            cont: signal(SignalKind::from_raw(nix::libc::SIGCONT))?,
        })
    }

    /// The next signal delivered.
    pub async fn recv(&mut self) -> Sig {
        tokio::select! {
            _ = self.term.recv() => Sig::Terminate,
            _ = self.int.recv() => Sig::Interrupt,
            _ = self.quit.recv() => Sig::Quit,
            _ = self.hup.recv() => Sig::Hangup,
            _ = self.usr2.recv() => Sig::Pause,
            _ = self.cont.recv() => Sig::Continue,
        }
    }
}
