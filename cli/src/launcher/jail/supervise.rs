//! Waiting for one child while passing signals on to it: what the jail's helper does for
//! the jail's init, and what the init (process 1 of the jail's PID namespace) does for CMD.
//!
//! Signals are taken synchronously from a `signalfd` (no handler runs, so nothing here
//! needs `unsafe`), which also lets process 1 receive the signals sluice passes on: the
//! kernel drops a signal sent to a namespace's init only when it is neither handled nor
//! blocked. A spawned child inherits the mask, so it is set only once the child is
//! spawned; nothing is passed on before (sluice passes signals on only once the init has
//! reported that CMD started, which it does after), and a child that ended in between is
//! reaped on the first look.
//!
//! What it must never do: return before the child has ended, or hide how it ended (an exit
//! code is passed on as is, a signal as 128 + its number, as a shell does).

use std::process::ExitCode;

use nix::errno::Errno;
use nix::sys::signal::{SigSet, Signal, kill};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

/// The signals passed on, as sluice itself passes them on (see `launcher::FORWARDED`).
const FORWARDED: [Signal; 5] = [
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
];

/// The signals this process passes on, taken over once its child is spawned.
pub(crate) struct Supervisor {
    signals: SignalFd,
    forward_interrupt: bool,
}

impl Supervisor {
    /// Blocks the signals this process passes on (and SIGCHLD, SIGINT) and opens the
    /// descriptor they are read from. `forward_interrupt`: pass SIGINT on too (CMD has a
    /// terminal of its own, where sluice's SIGINT would not otherwise reach it); without
    /// it SIGINT is swallowed, since a terminal's Ctrl-C already reached the child.
    pub(crate) fn new(forward_interrupt: bool) -> Result<Self, String> {
        let mut mask = SigSet::empty();
        for signal in FORWARDED {
            mask.add(signal);
        }
        mask.add(Signal::SIGINT);
        mask.add(Signal::SIGCHLD);
        mask.thread_block()
            .map_err(|e| format!("cannot take the jail's signals: {e}"))?;
        let signals = SignalFd::with_flags(&mask, SfdFlags::SFD_CLOEXEC)
            .map_err(|e| format!("cannot take the jail's signals: {e}"))?;
        Ok(Self {
            signals,
            forward_interrupt,
        })
    }

    /// Waits until `child` ends, passing signals on to it and reaping every other child
    /// (process 1 inherits the namespace's orphans); returns how it ended.
    pub(crate) fn wait(self, child: u32) -> ExitCode {
        let Ok(child) = i32::try_from(child).map(Pid::from_raw) else {
            return ExitCode::from(127);
        };
        loop {
            if let Some(code) = reap(child) {
                return ExitCode::from(code);
            }
            let signal = match self.signals.read_signal() {
                Ok(Some(info)) => Signal::try_from(info.ssi_signo as i32).ok(),
                Ok(None) | Err(Errno::EINTR) => None,
                // Without its signals this process cannot pass them on, but it must still
                // not end before the child: wait for it alone.
                Err(_) => return wait_alone(child),
            };
            match signal {
                Some(Signal::SIGINT) if !self.forward_interrupt => {}
                Some(Signal::SIGCHLD) | None => {}
                Some(signal) => {
                    let _ = kill(child, signal);
                }
            }
        }
    }
}

/// Reaps every child that has ended; the child's exit code once it has.
fn reap(child: Pid) -> Option<u8> {
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) if pid == child => {
                return Some(u8::try_from(code).unwrap_or(1));
            }
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == child => {
                return Some(128u8.saturating_add(signal as u8));
            }
            Ok(WaitStatus::StillAlive) => return None,
            Ok(_) | Err(Errno::EINTR) => continue,
            // No child left at all: the child was reaped elsewhere (it cannot be), or
            // never was.
            Err(_) => return Some(127),
        }
    }
}

/// Waits for the child without passing signals on.
fn wait_alone(child: Pid) -> ExitCode {
    loop {
        match waitpid(child, None) {
            Ok(WaitStatus::Exited(_, code)) => {
                return ExitCode::from(u8::try_from(code).unwrap_or(1));
            }
            Ok(WaitStatus::Signaled(_, signal, _)) => {
                return ExitCode::from(128u8.saturating_add(signal as u8));
            }
            Ok(_) | Err(Errno::EINTR) => continue,
            Err(_) => return ExitCode::from(127),
        }
    }
}
