//! Processes: the protocol between the harness and the peers it starts (upstream, sluice,
//! hudsucker, mitmproxy), and what `/proc` says about them (peak memory, CPU time).
//!
//! A peer announces itself with one stdout line, `ready ADDR`, and stops when its stdin
//! closes; mitmproxy, which speaks no such protocol, is ready once its port accepts and its
//! CA file exists. This module never signals a process it did not start.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::error::BenchError;

/// How long a peer may take to get ready.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Prints the `ready ADDR` line the harness waits for (child side).
pub(crate) fn announce_ready(addr: SocketAddr) -> Result<(), BenchError> {
    let mut stdout = std::io::stdout();
    writeln!(stdout, "ready {addr}")
        .and_then(|()| stdout.flush())
        .map_err(|e| BenchError::peer("child", format!("stdout: {e}")))
}

/// Resolves when stdin reaches its end (child side): the harness closes it to stop us.
pub(crate) async fn stdin_closed() {
    let mut stdin = tokio::io::stdin();
    let mut sink = [0u8; 64];
    while matches!(stdin.read(&mut sink).await, Ok(n) if n > 0) {}
}

/// How the harness knows a started peer is ready.
pub(crate) enum Ready {
    /// It prints `ready ADDR`.
    Line,
    /// It listens on this address once this file exists (mitmproxy).
    Port {
        /// Where it will listen.
        addr: SocketAddr,
        /// A file it writes when it has started.
        file: PathBuf,
    },
}

/// A started peer process.
pub(crate) struct Spawned {
    child: Child,
    addr: SocketAddr,
    stderr_path: PathBuf,
}

impl Spawned {
    /// Starts `command` (stdin piped, stdout piped, stderr to `stderr_path`) and waits until
    /// it is ready.
    pub(crate) async fn start(
        name: &str,
        mut command: Command,
        stderr_path: &Path,
        ready: Ready,
    ) -> Result<Self, BenchError> {
        let stderr = std::fs::File::create(stderr_path).map_err(BenchError::file(stderr_path))?;
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .map_err(|e| BenchError::peer(name, format!("cannot start: {e}")))?;
        let addr = match ready {
            Ready::Line => {
                let stdout = child.stdout.take().ok_or_else(|| {
                    BenchError::peer(name, "stdout was not captured (a harness bug)")
                })?;
                let mut lines = BufReader::new(stdout).lines();
                let line = tokio::time::timeout(READY_TIMEOUT, lines.next_line()).await;
                match line {
                    Ok(Ok(Some(line))) => parse_ready(&line).ok_or_else(|| {
                        BenchError::peer(name, format!("printed {line:?}, expected `ready ADDR`"))
                    })?,
                    _ => {
                        return Err(BenchError::peer(
                            name,
                            format!(
                                "did not print `ready ADDR` within {READY_TIMEOUT:?}; stderr: {}",
                                tail(stderr_path)
                            ),
                        ));
                    }
                }
            }
            Ready::Port { addr, file } => {
                let since = Instant::now();
                loop {
                    if let Ok(Some(status)) = child.try_wait() {
                        return Err(BenchError::peer(
                            name,
                            format!(
                                "exited with {status} before listening; stderr: {}",
                                tail(stderr_path)
                            ),
                        ));
                    }
                    if file.exists() && tokio::net::TcpStream::connect(addr).await.is_ok() {
                        break addr;
                    }
                    if since.elapsed() > READY_TIMEOUT {
                        return Err(BenchError::peer(
                            name,
                            format!(
                                "not listening on {addr} within {READY_TIMEOUT:?}; stderr: {}",
                                tail(stderr_path)
                            ),
                        ));
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        };
        Ok(Self {
            child,
            addr,
            stderr_path: stderr_path.to_owned(),
        })
    }

    /// Where it listens.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its process id, for `/proc` (none once it has exited).
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// The last lines of its stderr.
    pub(crate) fn stderr_tail(&self) -> String {
        tail(&self.stderr_path)
    }

    /// Its exit status, if it has exited (without waiting).
    pub(crate) fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Closes its stdin and waits for it to exit; kills it after `grace`. Returns its exit
    /// status, or `None` when it had to be killed.
    pub(crate) async fn finish(mut self, grace: Duration) -> Option<std::process::ExitStatus> {
        drop(self.child.stdin.take());
        match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(status) => status.ok(),
            Err(_) => {
                let _ = self.child.kill().await;
                None
            }
        }
    }

    /// Closes its stdin and waits for it to exit; kills it after `grace`.
    pub(crate) async fn stop(mut self, grace: Duration) {
        drop(self.child.stdin.take());
        if tokio::time::timeout(grace, self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

fn parse_ready(line: &str) -> Option<SocketAddr> {
    line.strip_prefix("ready ")?.trim().parse().ok()
}

/// The last 400 characters of a file, on one line.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let start = text.char_indices().rev().nth(399).map_or(0, |(i, _)| i);
    text[start..].replace('\n', " | ").trim().to_owned()
}

/// A free loopback port (bound, then released: for peers that take a port number).
pub(crate) fn free_port() -> Result<SocketAddr, BenchError> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| BenchError::peer("harness", format!("no free port: {e}")))?;
    listener
        .local_addr()
        .map_err(|e| BenchError::peer("harness", e))
}

/// Resident and peak resident memory of a process, in KiB (`VmRSS`, `VmHWM`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Memory {
    /// Resident now.
    pub(crate) rss_kib: u64,
    /// The peak so far.
    pub(crate) hwm_kib: u64,
}

/// Reads `/proc/PID/status`.
pub(crate) fn memory(pid: u32) -> Option<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_memory(&status)
}

fn parse_memory(status: &str) -> Option<Memory> {
    let field = |name: &str| {
        status.lines().find_map(|line| {
            let rest = line.strip_prefix(name)?.strip_prefix(':')?;
            rest.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()
        })
    };
    Some(Memory {
        rss_kib: field("VmRSS")?,
        hwm_kib: field("VmHWM")?,
    })
}

/// User plus system CPU time a process has used, in clock ticks (`/proc/PID/stat`).
pub(crate) fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_cpu_ticks(&stat)
}

fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    // Fields after the command name (which may hold spaces) start at field 3, `state`;
    // utime and stime are fields 14 and 15.
    let after = &stat[stat.rfind(')')? + 1..];
    let mut fields = after.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// Clock ticks per second (`getconf CLK_TCK`; 100, Linux's usual value, when unknown).
pub(crate) fn clock_ticks_per_second() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .filter(|&t| t > 0)
        .unwrap_or(100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_lines_name_an_address() {
        assert_eq!(
            parse_ready("ready 127.0.0.1:4000"),
            Some("127.0.0.1:4000".parse().expect("addr"))
        );
        assert_eq!(parse_ready("listening on 127.0.0.1:4000"), None);
        assert_eq!(parse_ready("ready nowhere"), None);
    }

    #[test]
    fn memory_fields_are_read_from_proc_status() {
        let status = "Name:\tsluice\nVmPeak:\t  900 kB\nVmHWM:\t   5120 kB\nVmRSS:\t   4096 kB\n";
        assert_eq!(
            parse_memory(status),
            Some(Memory {
                rss_kib: 4096,
                hwm_kib: 5120
            })
        );
        assert_eq!(parse_memory("Name:\tkernel-thread\n"), None);
    }

    #[test]
    fn cpu_ticks_survive_a_command_name_with_spaces() {
        let stat = "42 (a (weird) name) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 1 0 0";
        assert_eq!(parse_cpu_ticks(stat), Some(300));
        assert_eq!(parse_cpu_ticks("garbage"), None);
    }

    #[test]
    fn this_process_has_memory_and_cpu_figures() {
        let pid = std::process::id();
        let mem = memory(pid).expect("our own /proc/PID/status");
        assert!(mem.hwm_kib >= mem.rss_kib && mem.rss_kib > 0, "{mem:?}");
        assert!(cpu_ticks(pid).is_some());
    }
}
