//! Starting CMD with its standard streams: pipes, or, when sluice runs in a terminal, a
//! terminal of its own ([`super::terminal`]). Either way every byte CMD writes reaches
//! sluice's stdout or stderr through the guard's redactor ([`super::output::pump`]).
//!
//! Two steps, so that the jail's helper can be started with CMD's streams before the proxy
//! exists: [`spawn`] starts the process (CMD itself, or the helper that becomes CMD), and
//! [`Spawned::pump`] starts the redacting copies once the guard is known. Whatever CMD
//! writes in between waits in its pipe or terminal.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::process::Stdio;

use tokio::process::{Child, ChildStderr, ChildStdout, Command};
use tokio::task::JoinHandle;

use super::output::{Reporter, pump};
use super::terminal::{self, Pty, RawMode};

/// What to start.
pub(super) enum What<'a> {
    /// CMD itself, with exactly `env`.
    Command {
        program: &'a OsString,
        args: &'a [OsString],
        env: &'a BTreeMap<OsString, OsString>,
    },
    /// The jail's helper (sluice itself, these arguments, no environment), which becomes
    /// CMD once told what to run; it takes CMD's terminal itself.
    JailHelper { args: Vec<OsString> },
}

/// A started process whose output is not yet being copied.
pub(super) struct Spawned {
    child: Child,
    streams: Streams,
    raw: Option<RawMode>,
}

enum Streams {
    Piped(Option<ChildStdout>, Option<ChildStderr>),
    Terminal(OwnedFd),
}

/// CMD, started, and what runs beside it until it ends.
pub(super) struct Launched {
    /// The command.
    pub(super) child: Child,
    /// Each output stream's pump, under the name its redactions are audited with.
    pub(super) outputs: Vec<(&'static str, JoinHandle<super::output::Redacted>)>,
    /// Tasks that end with the command (window-size changes).
    pub(super) tasks: Vec<JoinHandle<()>>,
    /// The outer terminal's raw mode, restored when this is dropped: after the last output.
    pub(super) raw: Option<RawMode>,
}

/// Whether what is started gets a terminal of its own: sluice's stdin and stdout are one.
pub(super) fn in_terminal() -> bool {
    terminal::is_interactive()
}

/// Starts `what`, in a terminal of its own when [`in_terminal`], with pipes otherwise.
pub(super) fn spawn(what: What<'_>) -> std::io::Result<Spawned> {
    let terminal = in_terminal();
    let mut command = match &what {
        What::Command { program, args, env } if terminal => {
            // The first step sets CMD's session and controlling terminal, then becomes CMD.
            let mut command = Command::new(std::env::current_exe()?);
            command
                .args(["__terminal-exec", "--"])
                .arg(program)
                .args(*args)
                .env_clear()
                .envs(*env);
            command
        }
        What::Command { program, args, env } => {
            let mut command = Command::new(program);
            command.args(*args).env_clear().envs(*env);
            command
        }
        What::JailHelper { args } => {
            // The helper finds `ip` and `nft` on sluice's own PATH and the system's sbin.
            let mut path = std::env::var_os("PATH").unwrap_or_default();
            path.push(":/usr/sbin:/sbin:/usr/bin:/bin");
            let mut command = Command::new(std::env::current_exe()?);
            command.args(args).env_clear().env("PATH", path);
            command
        }
    };
    if !terminal {
        let mut child = command
            .stdin(Stdio::inherit())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let streams = Streams::Piped(child.stdout.take(), child.stderr.take());
        return Ok(Spawned {
            child,
            streams,
            raw: None,
        });
    }
    let pty = Pty::open()?;
    // Raw before the command starts, so that nothing it does sees the outer terminal
    // cooked (and restored by the drop if it cannot start).
    let raw = RawMode::enter()?;
    terminal::forward_input(pty.master())?;
    let child = command
        .stdin(pty.stdio()?)
        .stdout(pty.stdio()?)
        .stderr(pty.stdio()?)
        .spawn()?;
    Ok(Spawned {
        child,
        streams: Streams::Terminal(pty.into_master()),
        raw: Some(raw),
    })
}

impl Spawned {
    /// Ends a process that will not be told what to run (the jail helper, when the proxy
    /// could not start).
    pub(super) async fn abandon(mut self) {
        let _ = self.child.kill().await;
    }

    /// Starts copying the output through the guard's redactor (and, in a terminal,
    /// following its window size).
    pub(super) fn pump(
        self,
        guard: &sluice_proxy::GuardInForce,
        audit: &sluice_audit::AuditLog,
    ) -> std::io::Result<Launched> {
        let reporter = |stream| Reporter::new(audit.clone(), stream);
        let mut outputs = Vec::new();
        let mut tasks = Vec::new();
        match self.streams {
            Streams::Piped(stdout, stderr) => {
                if let Some(out) = stdout {
                    outputs.push((
                        "stdout",
                        tokio::spawn(pump(
                            out,
                            tokio::io::stdout(),
                            guard.clone(),
                            reporter("stdout"),
                        )),
                    ));
                }
                if let Some(err) = stderr {
                    outputs.push((
                        "stderr",
                        tokio::spawn(pump(
                            err,
                            tokio::io::stderr(),
                            guard.clone(),
                            reporter("stderr"),
                        )),
                    ));
                }
            }
            Streams::Terminal(master) => {
                let resized = master.try_clone()?;
                if let Ok(mut changes) =
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())
                {
                    tasks.push(tokio::spawn(async move {
                        while changes.recv().await.is_some() {
                            terminal::copy_window_size(&resized);
                        }
                    }));
                }
                // Reading the master ends (EIO) once every holder of the slave closed it.
                let output = tokio::fs::File::from_std(std::fs::File::from(master));
                outputs.push((
                    "stdout",
                    tokio::spawn(pump(
                        output,
                        tokio::io::stdout(),
                        guard.clone(),
                        reporter("stdout"),
                    )),
                ));
            }
        }
        Ok(Launched {
            child: self.child,
            outputs,
            tasks,
            raw: self.raw,
        })
    }
}
