//! The jail: `sluice run` makes CMD's network its own, where sluice is the only way out.
//!
//! sluice starts a helper (itself, `__jail-helper`, see [`helper`]) with CMD's standard
//! streams; the helper makes user, network and mount namespaces, the sockets sluice serves
//! inside them (the proxy listener, the capture listener every other TCP connection is
//! redirected to, the resolver), hands them over a unix socket in the run directory
//! ([`wire`]), waits for what to run, binds the run's trust store and resolver
//! configuration, and starts CMD's init ([`init`]) in a PID namespace of its own, which
//! mounts that namespace's `/proc` and starts CMD one user namespace further down. sluice serves those sockets from outside like any
//! listener: the namespace a socket was made in is the one its traffic lives in.
//!
//! What it must never do: run CMD when the jail could not be made (the launch is refused,
//! naming `--no-jail`), or dial anything a connection inside named by address alone.

mod helper;
mod init;
mod supervise;
mod wire;

use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub(crate) use helper::main as helper_main;
pub(crate) use init::main as init_main;
pub(crate) use wire::Launch;
use wire::Ready;

/// How long the helper may take to make the jail.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// A jail being made: the socket the helper reports to.
pub(crate) struct Jail {
    listener: UnixListener,
    socket: PathBuf,
}

/// The line to the helper, waiting for what to run.
pub(crate) struct Line {
    stream: UnixStream,
}

/// The jail's sockets, made inside its network.
pub(crate) struct Inside {
    /// The proxy listener inside (127.0.0.1, a free port).
    pub(crate) proxy: std::net::TcpListener,
    /// The capture listener inside, the redirect target.
    pub(crate) capture: std::net::TcpListener,
    /// The resolver's socket inside (127.0.0.1:53).
    pub(crate) dns: std::net::UdpSocket,
}

impl Jail {
    /// Opens the helper's socket in the (private) run directory.
    pub(crate) fn prepare(run_dir: &Path) -> std::io::Result<Self> {
        let socket = run_dir.join("jail.sock");
        let listener = UnixListener::bind(&socket)?;
        Ok(Self { listener, socket })
    }

    /// The helper's arguments (after the program, sluice itself).
    pub(crate) fn helper_args(&self) -> Vec<std::ffi::OsString> {
        vec!["__jail-helper".into(), self.socket.clone().into_os_string()]
    }

    /// Waits for the helper's report: the jail's sockets, or why it could not be made.
    pub(crate) fn inside(self) -> Result<(Line, Inside), String> {
        self.listener
            .set_nonblocking(true)
            .map_err(|e| e.to_string())?;
        let deadline = std::time::Instant::now() + READY_TIMEOUT;
        let stream = loop {
            match self.listener.accept() {
                Ok((stream, _)) => break stream,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if std::time::Instant::now() > deadline {
                        return Err("the jail helper did not report in time".into());
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(e) => return Err(format!("the jail helper could not report: {e}")),
            }
        };
        stream.set_nonblocking(false).map_err(|e| e.to_string())?;
        stream
            .set_read_timeout(Some(READY_TIMEOUT))
            .map_err(|e| e.to_string())?;
        let (ready, fds) = wire::receive_ready(&stream).map_err(|e| e.to_string())?;
        match ready {
            Ready::Failed(why) => Err(why),
            Ready::Sockets => {
                let [proxy, capture, dns]: [_; 3] = fds
                    .try_into()
                    .map_err(|_| "the jail helper sent the wrong sockets".to_owned())?;
                stream.set_read_timeout(None).map_err(|e| e.to_string())?;
                Ok((
                    Line { stream },
                    Inside {
                        proxy: proxy.into(),
                        capture: capture.into(),
                        dns: dns.into(),
                    },
                ))
            }
        }
    }
}

impl Line {
    /// Tells the helper what to run and waits until it has become CMD (blocking: call it
    /// off the runtime's threads); the error is why CMD could not start.
    pub(crate) fn launch(self, launch: &Launch) -> Result<(), String> {
        wire::send_launch(&self.stream, launch)
            .map_err(|e| format!("cannot tell the jail what to run: {e}"))?;
        wire::receive_outcome(&self.stream)
    }
}
