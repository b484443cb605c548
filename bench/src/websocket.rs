//! `sluice-bench websocket`: what scanning WebSocket frames costs, against sluice tunnelling
//! the same upstream uninspected, both measured in the same run.
//!
//! Echo round trips of 64 KiB text messages over [`CONNECTIONS`] kept-open WebSockets, each
//! connection sending its next message when the last one's echo is back, for a bounded time:
//!
//! - **inspected**: sluice terminates TLS, scans the handshake, and parses every frame: each
//!   message toward the upstream carries the bench token's placeholder once and has it
//!   swapped (the secret is granted `in: [body]`, which covers WebSocket messages), and each
//!   echo, which now carries the real value, is redacted back;
//! - **passthrough**: sluice tunnels the upstream uninspected (CONNECT and bytes relayed,
//!   TLS end to end), the floor of any proxy hop;
//! - **direct**: no proxy, the limit.
//!
//! Every echo must come back exactly as it was sent (the placeholder restored, in the
//! inspected case), and the inspected sluice's audit log must hold one swap and one redaction
//! per message; anything else fails the run. Rounds alternate the three paths; the median
//! round of each is reported. The target: inspected ≥ 0.7× passthrough.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use futures_util::{SinkExt, StreamExt};
use http::HeaderValue;
use tokio_tungstenite::tungstenite::Message;

use crate::child::{self, Spawned};
use crate::error::BenchError;
use crate::harness::{basic_auth, stand_in_value};
use crate::load::{ProxyAccess, Route};
use crate::pki::{ClientTls, Proto, UPSTREAM_HOST};
use crate::sluice_peer::SECRET;
use crate::upstream::TOKEN_VAR;

/// WebSockets open at once, each one message in flight.
const CONNECTIONS: usize = 4;

/// The target: inspected echo throughput against passthrough.
const TARGET: f64 = 0.7;

/// How long one echo may take before the run fails.
const ECHO_TIMEOUT: Duration = Duration::from_secs(10);

/// What `sluice-bench websocket` takes.
#[derive(Debug, Args)]
pub(crate) struct WebSocketArgs {
    /// Rounds of each path; the median round is reported.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Seconds per path per round.
    #[arg(long, default_value_t = 3.0)]
    phase_secs: f64,
    /// The message size in KiB.
    #[arg(long, default_value_t = 64)]
    message_kib: usize,
    /// A quick check that the benchmark works (one short round); the target is not judged.
    #[arg(long)]
    smoke: bool,
}

/// The paths measured, in the order each round runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Path {
    Inspected,
    Passthrough,
    Direct,
}

impl Path {
    const ALL: [Path; 3] = [Path::Inspected, Path::Passthrough, Path::Direct];

    fn label(self) -> &'static str {
        match self {
            Path::Inspected => "sluice, frames inspected (swap out, redact back)",
            Path::Passthrough => "sluice, passthrough (tunnelled uninspected)",
            Path::Direct => "direct (no proxy)",
        }
    }
}

/// One path's figures in one round.
#[derive(Debug, Clone, Copy, Default)]
struct Echoes {
    round_trips_per_s: f64,
    mib_per_s: f64,
    /// sluice's CPU per MiB echoed (both directions of one message count once), in ms.
    cpu_ms_per_mib: Option<f64>,
    round_trips: u64,
}

/// The declaration of the inspected sluice: the bench token swapped in bodies (WebSocket
/// messages among them) toward the upstream.
fn declaration() -> String {
    format!(
        "version: 1\n\
         secrets:\n  \
           {SECRET}:\n    \
             from: {{ env: {TOKEN_VAR} }}\n    \
             hosts: [\"{UPSTREAM_HOST}\"]\n    \
             sinks: [egress]\n    \
             in: [body]\n\
         egress:\n  \
           allow_ips: [\"127.0.0.1/32\"]\n"
    )
}

/// Runs the benchmark and prints the report; exit 2 when the target is missed.
pub(crate) fn run(args: &WebSocketArgs) -> Result<ExitCode, BenchError> {
    let runtime = crate::harness::client_runtime()?;
    let (rounds, phase) = if args.smoke {
        (1, Duration::from_millis(300))
    } else {
        (args.rounds.max(1), Duration::from_secs_f64(args.phase_secs))
    };
    let kib = args.message_kib.max(1);
    let figures = runtime.block_on(measure(rounds, phase, kib))?;
    println!("{}", render(&figures, kib));
    let ratio = figures[0].mib_per_s / figures[1].mib_per_s.max(1e-9);
    Ok(if args.smoke || ratio >= TARGET {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

fn render(figures: &[Echoes; 3], kib: usize) -> String {
    let mut out = format!(
        "| echo of {kib} KiB text messages, {CONNECTIONS} WebSockets | round trips/s | MiB/s each way | sluice CPU ms/MiB | round trips |\n\
         |---|---:|---:|---:|---:|\n"
    );
    for (path, echoes) in Path::ALL.iter().zip(figures) {
        let cpu = echoes
            .cpu_ms_per_mib
            .map_or_else(|| "—".to_owned(), |ms| format!("{ms:.2}"));
        out.push_str(&format!(
            "| {} | {:.0} | {:.1} | {cpu} | {} |\n",
            path.label(),
            echoes.round_trips_per_s,
            echoes.mib_per_s,
            echoes.round_trips,
        ));
    }
    let ratio = figures[0].mib_per_s / figures[1].mib_per_s.max(1e-9);
    let judge = if ratio >= TARGET { "met" } else { "MISSED" };
    out.push_str(&format!(
        "\n| target | measured | |\n|---|---:|---|\n\
         | inspected ≥ {TARGET}× passthrough | {ratio:.3}× | {judge} |"
    ));
    out
}

async fn measure(rounds: usize, phase: Duration, kib: usize) -> Result<[Echoes; 3], BenchError> {
    let tmp = tempfile::tempdir().map_err(BenchError::file(std::env::temp_dir()))?;
    let dir = tmp.path();
    let exe = std::env::current_exe().map_err(BenchError::file("current executable"))?;
    let value = stand_in_value("benchvalue");
    let upstream = crate::upstream::spawn(&exe, dir, &value).await?;
    // Two sluices, each in a directory of its own (its CA, placeholders, audit log).
    let inspect_dir = sluice_dir(dir, "inspected")?;
    let policy = inspect_dir.join("websocket.yaml");
    std::fs::write(&policy, declaration()).map_err(BenchError::file(&policy))?;
    let inspecting = crate::sluice_peer::spawn(&exe, &inspect_dir, &value, |sluice| {
        sluice.arg("--policy").arg(&policy);
    })
    .await?;
    let pass_dir = sluice_dir(dir, "passthrough")?;
    let tunnelling = crate::sluice_peer::spawn(&exe, &pass_dir, &value, |sluice| {
        sluice.arg("--mode").arg("passthrough");
    })
    .await?;

    let read = |dir: &std::path::Path, name: &str| {
        let path = dir.join(name);
        std::fs::read_to_string(&path)
            .map(|s| s.trim().to_owned())
            .map_err(BenchError::file(path))
    };
    let placeholder = read(&inspect_dir, "placeholder")?;
    // The inspecting sluice's CA signs what the client sees; through the tunnel, the
    // upstream's own certificate arrives.
    let proxied =
        |sluice: &Spawned, dir: &std::path::Path, ca: &str| -> Result<Route, BenchError> {
            Ok(Route {
                proxy: Some(ProxyAccess {
                    addr: sluice.addr(),
                    authorization: read(dir, "proxy-url").ok().map(|url| basic_auth(&url)),
                }),
                tls: ClientTls::trusting(&dir.join(ca))?,
                upstream: upstream.addr(),
                authorization: HeaderValue::from_static("-"),
                headers: Vec::new(),
            })
        };
    let routes = [
        Arc::new(proxied(&inspecting, &inspect_dir, "ca.pem")?),
        Arc::new(proxied(&tunnelling, &pass_dir, "upstream-ca.pem")?),
        Arc::new(Route {
            proxy: None,
            tls: ClientTls::trusting(&dir.join("upstream-ca.pem"))?,
            upstream: upstream.addr(),
            authorization: HeaderValue::from_static("-"),
            headers: Vec::new(),
        }),
    ];
    let message: Message = Message::text(message_with(&placeholder, kib << 10));
    let cpu_of = |sluice: &Spawned| sluice.pid().and_then(child::cpu_ticks);
    let ticks_per_second = child::clock_ticks_per_second() as f64;
    let mut per_path: [Vec<Echoes>; 3] = Default::default();
    let mut inspected_messages = 0u64;
    for _ in 0..rounds {
        for (at, path) in Path::ALL.iter().enumerate() {
            let sluice = match path {
                Path::Inspected => Some(&inspecting),
                Path::Passthrough => Some(&tunnelling),
                Path::Direct => None,
            };
            let before = sluice.and_then(cpu_of);
            let (round_trips, elapsed) =
                echo(&routes[at], &message, phase).await.map_err(|why| {
                    BenchError::Request(format!(
                        "{}: {why}; sluice: {}",
                        path.label(),
                        sluice.map(Spawned::stderr_tail).unwrap_or_default()
                    ))
                })?;
            if *path == Path::Inspected {
                inspected_messages += round_trips;
            }
            let mib = round_trips as f64 * kib as f64 / 1024.0;
            let cpu_ms_per_mib = match (before, sluice.and_then(cpu_of)) {
                (Some(before), Some(after)) => {
                    Some((after - before) as f64 / ticks_per_second * 1e3 / mib.max(1e-9))
                }
                _ => None,
            };
            per_path[at].push(Echoes {
                round_trips_per_s: round_trips as f64 / elapsed.as_secs_f64().max(1e-9),
                mib_per_s: mib / elapsed.as_secs_f64().max(1e-9),
                cpu_ms_per_mib,
                round_trips,
            });
        }
    }
    inspecting.stop(Duration::from_secs(3)).await;
    tunnelling.stop(Duration::from_secs(3)).await;
    upstream.stop(Duration::from_secs(3)).await;
    check_audit(&read(&inspect_dir, "audit.jsonl")?, inspected_messages)?;
    Ok(per_path.map(|mut rounds| {
        rounds.sort_by(|a, b| a.mib_per_s.total_cmp(&b.mib_per_s));
        rounds[rounds.len() / 2]
    }))
}

/// `dir/name`, with the upstream's CA copied in (a sluice peer trusts the one in its own
/// directory).
fn sluice_dir(dir: &std::path::Path, name: &str) -> Result<std::path::PathBuf, BenchError> {
    let own = dir.join(name);
    std::fs::create_dir_all(&own).map_err(BenchError::file(&own))?;
    let ca = own.join("upstream-ca.pem");
    std::fs::copy(dir.join("upstream-ca.pem"), &ca).map_err(BenchError::file(&ca))?;
    Ok(own)
}

/// `len` bytes of readable text with `placeholder` once, in its middle.
fn message_with(placeholder: &str, len: usize) -> String {
    let line = "sluice-bench websocket message: the quick brown fox jumps over the lazy dog\n";
    let mut text: String = line.chars().cycle().take(len).collect();
    let at = len.saturating_sub(placeholder.len()) / 2;
    text.replace_range(at..(at + placeholder.len()).min(len), placeholder);
    text
}

/// Echo round trips of `message` over [`CONNECTIONS`] WebSockets opened on `route`, for
/// `phase`: how many came back, and the time they took. An echo that differs from what was
/// sent, or a connection that fails, fails the phase.
async fn echo(
    route: &Arc<Route>,
    message: &Message,
    phase: Duration,
) -> Result<(u64, Duration), String> {
    let mut sockets = Vec::with_capacity(CONNECTIONS);
    for _ in 0..CONNECTIONS {
        sockets.push(open(route).await?);
    }
    let started = Instant::now();
    let until = started + phase;
    let mut tasks = Vec::with_capacity(CONNECTIONS);
    for mut ws in sockets {
        let message = message.clone();
        tasks.push(tokio::spawn(async move {
            let mut round_trips = 0u64;
            while Instant::now() < until {
                ws.send(message.clone())
                    .await
                    .map_err(|e| format!("sending a message: {e}"))?;
                let echoed = loop {
                    match tokio::time::timeout(ECHO_TIMEOUT, ws.next()).await {
                        Err(_) => return Err(format!("no echo within {ECHO_TIMEOUT:?}")),
                        Ok(None) => return Err("the WebSocket closed".to_owned()),
                        Ok(Some(Err(e))) => return Err(format!("reading the echo: {e}")),
                        Ok(Some(Ok(Message::Text(text)))) => break Message::Text(text),
                        Ok(Some(Ok(Message::Close(frame)))) => {
                            return Err(format!("closed instead of an echo: {frame:?}"));
                        }
                        Ok(Some(Ok(_))) => {}
                    }
                };
                if echoed != message {
                    return Err("an echo came back different from what was sent".to_owned());
                }
                round_trips += 1;
            }
            let _ = ws.close(None).await;
            Ok(round_trips)
        }));
    }
    let mut total = 0;
    for task in tasks {
        total += task.await.map_err(|e| format!("echo task: {e}"))??;
    }
    Ok((total, started.elapsed()))
}

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>;

/// One WebSocket to the upstream's `/ws` on `route`: TLS (through the proxy's tunnel when
/// there is one), then the handshake, its `Sec-WebSocket-Accept` checked.
async fn open(route: &Route) -> Result<Socket, String> {
    let tls = route
        .connect_tls(Proto::H1)
        .await
        .map_err(|e| e.to_string())?;
    let url = format!("wss://{}/ws", route.authority());
    let (ws, _) = tokio_tungstenite::client_async(url, tls)
        .await
        .map_err(|e| format!("WebSocket handshake: {e}"))?;
    Ok(ws)
}

/// The inspected sluice swapped and redacted every message: one `swap` and one `redact` in
/// location `websocket`/`websocket-response` per message sent, and never the value.
fn check_audit(audit: &str, messages: u64) -> Result<(), BenchError> {
    let count = |event: &str, location: &str| {
        audit
            .lines()
            .filter(|l| l.contains(&format!("\"event\":\"{event}\"")))
            .filter(|l| l.contains(&format!("\"location\":\"{location}\"")))
            .count() as u64
    };
    let (swaps, redactions) = (
        count("swap", "websocket"),
        count("redact", "websocket-response"),
    );
    if swaps != messages || redactions != messages {
        return Err(BenchError::peer(
            "sluice",
            format!(
                "{messages} messages echoed through the inspecting sluice, but its audit log \
                 holds {swaps} swaps and {redactions} redactions"
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_holds_the_placeholder_once_at_its_size() {
        let message = message_with("SLUICE_PLACEHOLDER_x", 64 << 10);
        assert_eq!(message.len(), 64 << 10);
        assert_eq!(message.matches("SLUICE_PLACEHOLDER_x").count(), 1);
    }

    #[test]
    fn the_audit_check_wants_one_swap_and_one_redaction_per_message() {
        let swap = r#"{"event":"swap","secret":"api_token","location":"websocket","count":1}"#;
        let redact =
            r#"{"event":"redact","secret":"api_token","location":"websocket-response","count":1}"#;
        let audit = format!("{swap}\n{redact}\n{swap}\n{redact}\n");
        assert!(check_audit(&audit, 2).is_ok());
        assert!(check_audit(&audit, 3).is_err());
        assert!(check_audit(&format!("{swap}\n{swap}\n"), 2).is_err());
    }
}
