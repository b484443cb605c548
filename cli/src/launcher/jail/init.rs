//! Process 1 of the jail's PID namespace: `sluice __jail-init`, started by the helper with
//! its end of a socket pair as stdin. It receives what to run (and CMD's stdin, and the
//! line to sluice), mounts the namespace's own `/proc`, steps into a user and mount
//! namespace nested in the jail's, starts CMD, then waits for it as a namespace's init
//! must: passing signals on, reaping orphans. When it ends, the kernel ends every process
//! left in the namespace.
//!
//! Why a nested user namespace: CMD is root in it, but over nothing this process set up.
//! The mounts it inherits are locked together (it cannot unmount `/proc` to uncover the
//! host's, where sluice's processes are, nor the trust store's binds), and the jail's
//! network belongs to the outer one (it cannot remove the capture rules or the routes).
//!
//! What it must never do: start CMD when a step failed (the failure is reported to sluice,
//! which refuses the launch), or let CMD inherit the line to sluice.

use std::ffi::OsString;
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::net::UnixStream;
use std::process::{Command, ExitCode, Stdio};

use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};

use super::supervise::Supervisor;
use super::wire;

/// The init's entry point.
pub(crate) fn main() -> ExitCode {
    let handover = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map(UnixStream::from)
        .and_then(|stream| wire::receive_handover(&stream));
    let (launch, [stdin, report]) = match handover {
        Ok(handover) => handover,
        Err(error) => {
            eprintln!("sluice: the jail's init was not told what to run: {error}");
            return ExitCode::from(127);
        }
    };
    let report = UnixStream::from(report);
    let fail = |why: String| {
        let _ = (&report).write_all(why.as_bytes());
        ExitCode::from(127)
    };
    if let Err(why) = enclose() {
        return fail(why);
    }
    let argv: Vec<OsString> = launch
        .argv
        .iter()
        .map(|arg| OsString::from_vec(arg.clone()))
        .collect();
    let Some(program) = argv.first() else {
        return fail("no command to run".into());
    };
    let mut command = if launch.terminal {
        // The first step takes CMD's terminal as its session's (see launcher::terminal).
        let Ok(sluice) = std::env::current_exe() else {
            return fail("cannot find sluice itself to give the command its terminal".into());
        };
        let mut command = Command::new(sluice);
        command.args(["__terminal-exec", "--"]).args(&argv);
        command
    } else {
        let mut command = Command::new(program);
        command.args(&argv[1..]);
        command
    };
    command.env_clear().stdin(Stdio::from(stdin));
    for (key, value) in &launch.env {
        command.env(
            OsString::from_vec(key.clone()),
            OsString::from_vec(value.clone()),
        );
    }
    let terminal = launch.terminal;
    drop(launch);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => return fail(format!("{}: {error}", program.to_string_lossy())),
    };
    drop(command);
    let supervisor = match Supervisor::new(terminal) {
        Ok(supervisor) => supervisor,
        Err(why) => {
            let _ = child.kill();
            return fail(why);
        }
    };
    // The line closes: sluice reads that CMD started.
    drop(report);
    supervisor.wait(child.id())
}

/// Mounts this namespace's `/proc`, then enters the nested user and mount namespaces where
/// CMD runs, and makes this process's memory unreadable from there.
fn enclose() -> Result<(), String> {
    mount(
        Some("proc"),
        "/proc",
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(|e| format!("cannot mount the jail's /proc: {e}"))?;
    unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS)
        .map_err(|e| format!("cannot make the command's namespaces (unshare: {e})"))?;
    // Root inside stays root inside: the same user as the jail's, one level down.
    super::helper::map_root("0", "0")?;
    // The command could otherwise read this process's memory (its launch message).
    nix::sys::prctl::set_dumpable(false)
        .map_err(|e| format!("cannot make the jail's init unreadable: {e}"))?;
    // Should the helper die, so does the jail.
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
        .map_err(|e| format!("cannot tie the jail to sluice: {e}"))?;
    Ok(())
}
