//! A terminal for CMD: when sluice's own stdin and stdout are a terminal, CMD gets a
//! pseudo-terminal of its own, so interactive agent CLIs, editors, colours and progress bars
//! work (`isatty`, the window size, job control keys) while its output still passes the
//! guard.
//!
//! The outer terminal is put in raw mode for the run, so every key reaches CMD's terminal
//! as typed (Ctrl-C becomes CMD's SIGINT there), and restored on every exit path sluice
//! survives: CMD exiting or killed, a signal sluice forwards, an error, a panic (the
//! restore is a `Drop`). The window size is copied at start and on each `SIGWINCH`.
//!
//! CMD's session and controlling terminal are set by a small first step, `sluice
//! __terminal-exec -- CMD...` ([`exec`]), which `setsid`s, takes the terminal, then
//! replaces itself with CMD: this keeps every system call behind a safe wrapper (no
//! `pre_exec`). What it must never do: let a byte from CMD's terminal reach sluice's stdout
//! without the redactor, or leave the operator's terminal raw.

use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{ExitCode, Stdio};

use rustix::fs::{Mode, OFlags};
use rustix::pty::OpenptFlags;
use rustix::termios::{OptionalActions, Termios};

/// Whether CMD should get a terminal: sluice's own stdin and stdout are one.
pub(crate) fn is_interactive() -> bool {
    rustix::termios::isatty(io::stdin()) && rustix::termios::isatty(io::stdout())
}

/// A pseudo-terminal pair: sluice keeps the master, CMD gets the slave.
pub(crate) struct Pty {
    master: OwnedFd,
    slave: OwnedFd,
}

impl Pty {
    /// Opens a pair whose slave starts with the outer terminal's settings (echo, erase,
    /// line discipline) and window size.
    pub(crate) fn open() -> io::Result<Self> {
        let master =
            rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
        rustix::pty::grantpt(&master)?;
        rustix::pty::unlockpt(&master)?;
        let name = rustix::pty::ptsname(&master, Vec::new())?;
        let slave = rustix::fs::open(
            name.as_c_str(),
            OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        if let Ok(settings) = rustix::termios::tcgetattr(io::stdin()) {
            rustix::termios::tcsetattr(&slave, OptionalActions::Now, &settings)?;
        }
        let pty = Self { master, slave };
        pty.copy_window_size();
        Ok(pty)
    }

    /// The side sluice keeps.
    pub(crate) fn master(&self) -> &OwnedFd {
        &self.master
    }

    /// One of CMD's standard streams: a handle on the slave.
    pub(crate) fn stdio(&self) -> io::Result<Stdio> {
        Ok(Stdio::from(self.slave.try_clone()?))
    }

    /// Closes sluice's own handle on the slave once CMD holds it, so that reading the
    /// master ends when CMD (and whatever it started) has closed the terminal; returns the
    /// master.
    pub(crate) fn into_master(self) -> OwnedFd {
        self.master
    }

    fn copy_window_size(&self) {
        copy_window_size(&self.master);
    }
}

/// Copies the outer terminal's window size to CMD's (whose foreground then gets
/// `SIGWINCH` from the kernel).
pub(crate) fn copy_window_size(master: &impl AsFd) {
    if let Ok(size) = rustix::termios::tcgetwinsize(io::stdout()) {
        let _ = rustix::termios::tcsetwinsize(master, size);
    }
}

/// The outer terminal in raw mode, restored when dropped.
pub(crate) struct RawMode {
    saved: Termios,
}

impl RawMode {
    /// Puts the terminal on stdin in raw mode: no echo, no line editing, no signals from
    /// keys (they are CMD's terminal's to act on).
    pub(crate) fn enter() -> io::Result<Self> {
        let saved = rustix::termios::tcgetattr(io::stdin())?;
        let mut raw = saved.clone();
        raw.make_raw();
        rustix::termios::tcsetattr(io::stdin(), OptionalActions::Now, &raw)?;
        Ok(Self { saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = rustix::termios::tcsetattr(io::stdin(), OptionalActions::Now, &self.saved);
    }
}

/// Copies sluice's stdin to CMD's terminal, on a thread of its own: a read of a terminal
/// cannot be cancelled, and this thread must not hold the runtime's shutdown. It ends with
/// stdin, or when the terminal is gone, or with the process.
pub(crate) fn forward_input(master: &OwnedFd) -> io::Result<()> {
    let mut to = std::fs::File::from(master.try_clone()?);
    std::thread::Builder::new()
        .name("sluice-terminal-input".into())
        .spawn(move || {
            let mut stdin = io::stdin().lock();
            let mut buf = [0u8; 4096];
            loop {
                let n = match stdin.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                if to.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        })?;
    Ok(())
}

/// `sluice __terminal-exec -- CMD...`: in the process `sluice run` started on CMD's
/// terminal (its stdin, stdout and stderr), start a session, make the terminal its
/// controlling terminal, and become CMD. Returns only when CMD cannot be started (127, as
/// a shell does).
pub(crate) fn exec(command: &[OsString]) -> ExitCode {
    let Some((program, args)) = command.split_first() else {
        return ExitCode::from(127);
    };
    if let Err(error) = rustix::process::setsid() {
        eprintln!("sluice: cannot start a session for the command: {error}");
        return ExitCode::from(127);
    }
    if let Err(error) = rustix::process::ioctl_tiocsctty(io::stdin()) {
        eprintln!("sluice: cannot give the command its terminal: {error}");
        return ExitCode::from(127);
    }
    let error = std::process::Command::new(program).args(args).exec();
    eprintln!(
        "sluice: cannot start {}: {error}",
        program.to_string_lossy()
    );
    ExitCode::from(127)
}
