//! Starting CMD with its standard streams: pipes, or, when sluice runs in a terminal, a
//! terminal of its own ([`super::terminal`]). Either way every byte CMD writes reaches
//! sluice's stdout or stderr through the guard's redactor ([`super::output::pump`]).

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::process::Stdio;
use std::sync::Arc;

use sluice_guard::{Guard, Tally};
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use super::LaunchError;
use super::output::pump;
use super::terminal::{self, Pty, RawMode};

/// CMD, started, and what runs beside it until it ends.
pub(super) struct Launched {
    /// The command.
    pub(super) child: Child,
    /// Each output stream's pump, under the name its redactions are audited with.
    pub(super) outputs: Vec<(&'static str, JoinHandle<Tally>)>,
    /// Tasks that end with the command (window-size changes).
    pub(super) tasks: Vec<JoinHandle<()>>,
    /// The outer terminal's raw mode, restored when this is dropped: after the last output.
    pub(super) raw: Option<RawMode>,
}

/// Starts `program` with `args` and exactly `env`, in a terminal of its own when sluice's
/// stdin and stdout are one, with pipes otherwise.
pub(super) fn launch(
    program: &OsString,
    args: &[OsString],
    env: &BTreeMap<OsString, OsString>,
    guard: &Arc<Guard>,
) -> Result<Launched, LaunchError> {
    let spawn_error = |source| LaunchError::Spawn {
        program: program.to_string_lossy().into_owned(),
        source,
    };
    if terminal::is_interactive() {
        in_terminal(program, args, env, guard).map_err(spawn_error)
    } else {
        piped(program, args, env, guard).map_err(spawn_error)
    }
}

/// stdin inherited, stdout and stderr piped through the redactor, each flushed per read.
fn piped(
    program: &OsString,
    args: &[OsString],
    env: &BTreeMap<OsString, OsString>,
    guard: &Arc<Guard>,
) -> std::io::Result<Launched> {
    let mut child = Command::new(program)
        .args(args)
        .env_clear()
        .envs(env)
        .stdin(Stdio::inherit())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut outputs = Vec::new();
    if let Some(out) = child.stdout.take() {
        outputs.push((
            "stdout",
            tokio::spawn(pump(out, tokio::io::stdout(), guard.clone())),
        ));
    }
    if let Some(err) = child.stderr.take() {
        outputs.push((
            "stderr",
            tokio::spawn(pump(err, tokio::io::stderr(), guard.clone())),
        ));
    }
    Ok(Launched {
        child,
        outputs,
        tasks: Vec::new(),
        raw: None,
    })
}

/// A terminal of CMD's own: stdin, stdout and stderr on its slave (one stream, as in any
/// terminal), the master's output through the redactor to sluice's stdout, sluice's stdin
/// to the master, the outer terminal raw, and its window size followed.
fn in_terminal(
    program: &OsString,
    args: &[OsString],
    env: &BTreeMap<OsString, OsString>,
    guard: &Arc<Guard>,
) -> std::io::Result<Launched> {
    let pty = Pty::open()?;
    // Raw before CMD starts, so that nothing CMD does sees the outer terminal cooked (and
    // restored by the drop if CMD cannot start).
    let raw = RawMode::enter()?;
    terminal::forward_input(pty.master())?;
    // The first step sets CMD's session and controlling terminal, then becomes CMD.
    let child = Command::new(std::env::current_exe()?)
        .args(["__terminal-exec", "--"])
        .arg(program)
        .args(args)
        .env_clear()
        .envs(env)
        .stdin(pty.stdio()?)
        .stdout(pty.stdio()?)
        .stderr(pty.stdio()?)
        .spawn()?;
    let master = pty.into_master();
    let resized = master.try_clone()?;
    let mut tasks = Vec::new();
    if let Ok(mut changes) =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change())
    {
        tasks.push(tokio::spawn(async move {
            while changes.recv().await.is_some() {
                terminal::copy_window_size(&resized);
            }
        }));
    }
    // Reading the master ends (EIO) once every holder of the slave has closed it.
    let output = tokio::fs::File::from_std(std::fs::File::from(master));
    let outputs = vec![(
        "stdout",
        tokio::spawn(pump(output, tokio::io::stdout(), guard.clone())),
    )];
    Ok(Launched {
        child,
        outputs,
        tasks,
        raw: Some(raw),
    })
}
