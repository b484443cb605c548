//! The jail's inside: `sluice __jail-helper SOCKET`, started by sluice with
//! CMD's standard streams and no environment, single-threaded (a process with threads
//! cannot enter a user namespace). It makes the namespaces, brings up the network inside,
//! makes the sockets sluice will serve there and hands them over, then sets up the mounts
//! and becomes CMD.
//!
//! Inside: a user namespace where it is root (with power over nothing outside), a network
//! namespace with loopback only (nothing sent there can leave the machine), every address
//! local, every TCP connection to anything but loopback redirected (nftables) to sluice's
//! capture listener, sluice's resolver on 127.0.0.1:53, and a mount namespace where the
//! system trust store and `/etc/resolv.conf` are the run's. It must never run CMD when any
//! of that failed: it reports why and exits.

use std::ffi::OsString;
use std::io::Write;
use std::net::{TcpListener, UdpSocket};
use std::os::unix::ffi::OsStringExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};

use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};

use super::wire::{self, Ready};

/// The helper's entry point; returns only on failure (127, as a shell does).
pub(crate) fn main(socket: &Path) -> ExitCode {
    let stream = match UnixStream::connect(socket) {
        Ok(stream) => stream,
        Err(error) => {
            eprintln!("sluice: the jail cannot reach sluice: {error}");
            return ExitCode::from(127);
        }
    };
    let sockets = match enter() {
        Ok(sockets) => sockets,
        Err(why) => {
            let _ = wire::send_ready(&stream, &Ready::Failed(why), &[]);
            return ExitCode::from(127);
        }
    };
    if let Err(error) = wire::send_ready(
        &stream,
        &Ready::Sockets,
        &[&sockets.proxy, &sockets.capture, &sockets.dns],
    ) {
        eprintln!("sluice: the jail cannot hand its sockets over: {error}");
        return ExitCode::from(127);
    }
    drop(sockets);
    let launch = match wire::receive_launch(&stream) {
        Ok(launch) => launch,
        // sluice gave up (its proxy did not start): nothing to run.
        Err(_) => return ExitCode::from(127),
    };
    // From here a failure is told to sluice, which refuses the launch with it; on success
    // the line closes by itself as this process becomes CMD (the socket is close-on-exec).
    let fail = |why: String| {
        let _ = (&stream).write_all(why.as_bytes());
        ExitCode::from(127)
    };
    if let Err(why) = mounts(&launch.binds) {
        return fail(why);
    }
    if launch.terminal {
        if let Err(error) = rustix::process::setsid() {
            return fail(format!("cannot start a session for the command: {error}"));
        }
        if let Err(error) = rustix::process::ioctl_tiocsctty(std::io::stdin()) {
            return fail(format!("cannot give the command its terminal: {error}"));
        }
    }
    let mut argv = launch
        .argv
        .iter()
        .map(|arg| OsString::from_vec(arg.clone()));
    let Some(program) = argv.next() else {
        return fail("no command to run".into());
    };
    let mut command = Command::new(&program);
    command.args(argv).env_clear();
    for (key, value) in &launch.env {
        command.env(
            OsString::from_vec(key.clone()),
            OsString::from_vec(value.clone()),
        );
    }
    drop(launch);
    let error = command.exec();
    fail(format!("{}: {error}", program.to_string_lossy()))
}

/// The sockets made inside the jail's network.
struct Sockets {
    /// The proxy listener (the proxy variables point at it).
    proxy: TcpListener,
    /// Where every other TCP connection is redirected.
    capture: TcpListener,
    /// The resolver's socket, 127.0.0.1:53.
    dns: UdpSocket,
}

/// Makes the user, network and mount namespaces and the network inside; returns the
/// sockets, or why it could not (naming what failed, for the typed launch refusal).
fn enter() -> Result<Sockets, String> {
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET | CloneFlags::CLONE_NEWNS)
        .map_err(|e| format!("cannot make the jail's namespaces (unshare: {e}); user namespaces may be disabled or filtered by seccomp"))?;
    // Root inside, mapped to sluice's own user: power over the jail's namespaces only.
    let write = |file: &str, text: String| {
        std::fs::write(format!("/proc/self/{file}"), text)
            .map_err(|e| format!("cannot map the jail's user ({file}: {e})"))
    };
    write("setgroups", "deny".into())?;
    write("uid_map", format!("0 {uid} 1"))?;
    write("gid_map", format!("0 {gid} 1"))?;
    run("ip", &["link", "set", "lo", "up"])?;
    // Every address is local inside, so a connection to any of them reaches the redirect.
    run(
        "ip",
        &[
            "route",
            "add",
            "local",
            "0.0.0.0/0",
            "dev",
            "lo",
            "table",
            "local",
        ],
    )?;
    run(
        "ip",
        &[
            "-6", "route", "add", "local", "::/0", "dev", "lo", "table", "local",
        ],
    )?;
    let bind = |addr: &str| {
        TcpListener::bind(addr).map_err(|e| format!("cannot listen in the jail ({addr}): {e}"))
    };
    let proxy = bind("127.0.0.1:0")?;
    let capture = bind("127.0.0.1:0")?;
    let dns = UdpSocket::bind("127.0.0.1:53")
        .map_err(|e| format!("cannot serve the jail's resolver (127.0.0.1:53): {e}"))?;
    let capture_port = capture.local_addr().map_err(|e| e.to_string())?.port();
    let rules = format!(
        "table ip sluice_jail {{
  chain output {{
    type nat hook output priority -100; policy accept;
    ip daddr 127.0.0.1 return
    meta l4proto tcp redirect to :{capture_port}
  }}
}}
table ip6 sluice_jail {{
  chain output {{
    type nat hook output priority -100; policy accept;
    ip6 daddr ::1 return
    meta l4proto tcp redirect to :{capture_port}
  }}
}}
"
    );
    nft(&rules)?;
    Ok(Sockets {
        proxy,
        capture,
        dns,
    })
}

/// Runs a network tool inside the jail; its failure is the jail's.
fn run(program: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            format!("cannot run `{program}` to set up the jail's network: {e} (iproute2 is needed)")
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{program} {}` failed in the jail: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Loads the redirect rules with `nft`.
fn nft(rules: &str) -> Result<(), String> {
    let mut child = Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            format!("cannot run `nft` to capture the jail's connections: {e} (install nftables)")
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(rules.as_bytes())
            .map_err(|e| e.to_string())?;
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`nft` refused the jail's rules: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Makes every mount private to the jail, then binds each source over its target (a
/// target that does not exist on this system is left alone).
fn mounts(binds: &[(std::path::PathBuf, std::path::PathBuf)]) -> Result<(), String> {
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| format!("cannot make the jail's mounts private: {e}"))?;
    for (source, target) in binds {
        if !target.exists() {
            continue;
        }
        mount(
            Some(source.as_path()),
            target.as_path(),
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(|e| format!("cannot bind {} in the jail: {e}", target.display()))?;
    }
    Ok(())
}
