//! The jail's inside: `sluice __jail-helper SOCKET`, started by sluice with
//! CMD's standard streams and no environment, single-threaded (a process with threads
//! cannot enter a user namespace). It makes the namespaces, brings up the network inside,
//! makes the sockets sluice will serve there and hands them over, sets up the mounts,
//! then starts the jail's init ([`super::init`]) in a PID namespace of its own and waits
//! for it, passing sluice's signals on and its exit status back.
//!
//! Inside: a user namespace where it is root (with power over nothing outside), a network
//! namespace with loopback only (nothing sent there can leave the machine), every address
//! local, every TCP connection to anything but loopback redirected (nftables) to sluice's
//! capture listener, sluice's resolver on 127.0.0.1:53, and a mount namespace where the
//! system trust store and `/etc/resolv.conf` are the run's. It must never run CMD when any
//! of that failed: it reports why and exits.

use std::io::Write;
use std::net::{TcpListener, UdpSocket};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};

use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};

use super::supervise::Supervisor;
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
    // the init reports on the line instead.
    let fail = |why: String| {
        let _ = (&stream).write_all(why.as_bytes());
        ExitCode::from(127)
    };
    if let Err(why) = mounts(&launch.binds) {
        return fail(why);
    }
    // CMD's own PID namespace: its first process, the init, is process 1 there.
    if let Err(e) = unshare(CloneFlags::CLONE_NEWPID) {
        return fail(format!(
            "cannot make the jail's PID namespace (unshare: {e})"
        ));
    }
    let init = UnixStream::pair().and_then(|(ours, theirs)| {
        let child = Command::new(std::env::current_exe()?)
            .arg("__jail-init")
            .env_clear()
            .stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)))
            .spawn()?;
        Ok((child, ours))
    });
    let (init, ours) = match init {
        Ok(init) => init,
        Err(error) => return fail(format!("cannot start the jail's init: {error}")),
    };
    // The init is process 1 of its namespace: should this process fail now, its end
    // (the init's parent-death signal) ends the jail.
    let supervisor = match Supervisor::new(launch.terminal) {
        Ok(supervisor) => supervisor,
        Err(why) => return fail(why),
    };
    let handed = wire::send_handover(&ours, &launch, [&std::io::stdin(), &stream]);
    if let Err(error) = handed {
        return fail(format!("cannot tell the jail's init what to run: {error}"));
    }
    // From here the init holds the line to sluice and reports on it.
    drop((stream, ours, launch));
    supervisor.wait(init.id())
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
    // Should sluice die, so does the jail (and the init's own parent-death signal ends
    // everything inside with it).
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
        .map_err(|e| format!("cannot tie the jail to sluice: {e}"))?;
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET | CloneFlags::CLONE_NEWNS)
        .map_err(|e| format!("cannot make the jail's namespaces (unshare: {e}); user namespaces may be disabled or filtered by seccomp"))?;
    // Root inside, mapped to sluice's own user: power over the jail's namespaces only.
    map_root(&uid.to_string(), &gid.to_string())?;
    // Ports below 1024 are the workload's to bind in its own network, as root's would be
    // outside (its root is one namespace further down, without this network's powers).
    // Best effort: a kernel without the per-network setting keeps its default.
    let _ = std::fs::write("/proc/sys/net/ipv4/ip_unprivileged_port_start", "0");
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

/// Maps root of the user namespace just entered to `uid` and `gid` of the one above: the
/// only mapping a process may write for itself without privilege there.
pub(super) fn map_root(uid: &str, gid: &str) -> Result<(), String> {
    let write = |file: &str, text: String| {
        std::fs::write(format!("/proc/self/{file}"), text)
            .map_err(|e| format!("cannot map the jail's user ({file}: {e})"))
    };
    write("setgroups", "deny".into())?;
    write("uid_map", format!("0 {uid} 1"))?;
    write("gid_map", format!("0 {gid} 1"))
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
