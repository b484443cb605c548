//! The run: start the upstream, then each peer in turn (direct, sluice, sluice without
//! secrets, hudsucker, mitmproxy), check that it does what it claims (sluice swaps and
//! redacts; the others pass bytes through), measure every phase against it, read its memory
//! and CPU from `/proc`, stop it, and hand the figures to `report`.
//!
//! A peer that cannot be run is reported MISSING or FAILED with its reason, never dropped.
//! Every address is loopback; every phase is bounded in time.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use http::HeaderValue;
use tokio::process::Command;
use tokio::sync::Mutex;

use crate::child::{self, Ready, Spawned};
use crate::error::BenchError;
use crate::load::{self, ProxyAccess, Route, Sender};
use crate::pki::{ClientTls, Proto};
use crate::report::{
    Figures, Kind, Machine, MemoryFigures, PeerReport, PlanFigures, Report, SCENARIOS, Scenario,
    Status,
};
use crate::sluice_peer::Mode;
use crate::upstream::{BLOCK, TOKEN_VAR};

/// How the run is shaped.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    /// Smoke mode: direct and sluice only, short phases, a small body.
    pub(crate) smoke: bool,
    /// Length of each measured phase.
    pub(crate) phase: Duration,
    /// Size of the large body (a whole number of MiB).
    pub(crate) large_bytes: u64,
    /// Bound on the large download.
    pub(crate) large_limit: Duration,
    /// The peers, in order.
    pub(crate) peers: Vec<PeerSpec>,
    /// The phase ids to run (all when empty).
    pub(crate) phases: Vec<String>,
    /// Keep the run directory.
    pub(crate) keep: bool,
    /// The upstream offers HTTP/1.1 only (a diagnostic: which leg's protocol costs what).
    pub(crate) upstream_h1_only: bool,
}

/// A peer to measure.
#[derive(Clone, Debug)]
pub(crate) enum PeerSpec {
    /// No proxy: the client talks to the upstream.
    Direct,
    /// sluice, in its own process, with one of its declarations.
    Sluice(Mode),
    /// The hudsucker peer binary, or why there is none.
    Hudsucker(Result<PathBuf, String>),
    /// mitmproxy's `mitmdump`, or why there is none.
    Mitmproxy(Result<PathBuf, String>),
}

impl PeerSpec {
    /// Its short name, as reports and `--only` spell it.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Self::Direct => "direct",
            Self::Sluice(Mode::Full) => "sluice",
            Self::Sluice(Mode::Bare) => "sluice-bare",
            Self::Sluice(Mode::Passthrough) => "sluice-passthrough",
            Self::Hudsucker(_) => "hudsucker",
            Self::Mitmproxy(_) => "mitmproxy",
        }
    }

    fn about(&self) -> String {
        match self {
            Self::Direct => {
                "no proxy: the client's TLS ends at the upstream (the limit)".to_owned()
            }
            Self::Sluice(Mode::Full) => {
                "sluice, swapping one header and redacting every response".to_owned()
            }
            Self::Sluice(Mode::Bare) => {
                "sluice with no secret declared: TLS terminated, nothing to swap or redact"
                    .to_owned()
            }
            Self::Sluice(Mode::Passthrough) => {
                "sluice tunnelling the upstream uninspected: the floor of a proxy hop".to_owned()
            }
            Self::Hudsucker(_) => "hudsucker 0.25 (crates.io), no-op handler, HTTP/2 on".to_owned(),
            Self::Mitmproxy(Ok(path)) => format!("mitmproxy ({})", version_line(path)),
            Self::Mitmproxy(Err(_)) => "mitmproxy".to_owned(),
        }
    }
}

/// What each request must show for a peer to count as doing its job.
#[derive(Clone, Debug)]
enum Expect {
    /// sluice: the upstream saw the real value; the response carries the placeholder.
    Swap { placeholder: String },
    /// Everyone else: bytes pass unchanged both ways.
    PassThrough,
}

/// What every peer's phases share.
struct Context {
    plan: Plan,
    dir: PathBuf,
    exe: PathBuf,
    upstream: Spawned,
    upstream_ca: PathBuf,
    value: String,
    control: Mutex<Sender>,
    control_route: Route,
    ticks_per_second: u64,
}

/// The runtime a side-by-side benchmark drives its clients from: two workers, as the
/// machine has two cores (the peers it measures run as processes of their own).
pub(crate) fn client_runtime() -> Result<tokio::runtime::Runtime, BenchError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| BenchError::peer("harness", e))
}

/// A stand-in for a secret value: `prefix` and 32 random hex digits, new per run,
/// lowercase (so a header name holding it would still be found), not a credential anywhere.
pub(crate) fn stand_in_value(prefix: &str) -> String {
    let random = || {
        std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish()
    };
    format!("{prefix}{:016x}{:016x}", random(), random())
}

/// The `Authorization` a non-sluice peer carries: a placeholder-shaped string nothing swaps.
const FOREIGN_PLACEHOLDER: &str = "SLUICE_API_TOKEN_000000000000000000000000";

/// Runs every peer through every phase.
pub(crate) async fn run(plan: Plan) -> Result<Report, BenchError> {
    let mut report = Report {
        machine: machine(),
        plan: PlanFigures {
            smoke: plan.smoke,
            phase_s: plan.phase.as_secs_f64(),
            large_mib: plan.large_bytes / BLOCK as u64,
            large_limit_s: plan.large_limit.as_secs_f64(),
            phases: SCENARIOS
                .iter()
                .filter(|s| plan.phases.is_empty() || plan.phases.iter().any(|id| id == s.id))
                .map(|s| s.id.to_owned())
                .collect(),
            rounds: 1,
        },
        peers: Vec::new(),
    };
    let tmp = tempfile::tempdir().map_err(BenchError::file(std::env::temp_dir()))?;
    let dir = tmp.path().to_owned();
    let exe = std::env::current_exe().map_err(BenchError::file("current executable"))?;
    let value = stand_in_value("benchvalue");
    let mut upstream_cmd = Command::new(&exe);
    upstream_cmd
        .arg("upstream")
        .arg("--dir")
        .arg(&dir)
        .arg("--large-bytes")
        .arg(plan.large_bytes.to_string())
        .env(TOKEN_VAR, &value);
    if plan.upstream_h1_only {
        upstream_cmd.arg("--h1-only");
    }
    let upstream = Spawned::start(
        "upstream",
        upstream_cmd,
        &dir.join("upstream.stderr"),
        Ready::Line,
    )
    .await?;
    let upstream_ca = dir.join("upstream-ca.pem");
    let control_route = Route {
        proxy: None,
        tls: ClientTls::trusting(&upstream_ca)?,
        upstream: upstream.addr(),
        authorization: HeaderValue::from_static(FOREIGN_PLACEHOLDER),
        headers: Vec::new(),
    };
    let control = control_route.open(Proto::H1).await?;
    let context = Context {
        plan: plan.clone(),
        dir,
        exe,
        upstream,
        upstream_ca,
        value,
        control: Mutex::new(control),
        control_route,
        ticks_per_second: child::clock_ticks_per_second(),
    };
    for spec in &plan.peers {
        eprintln!("sluice-bench: measuring {}", spec.name());
        let peer = measure_peer(spec, &context).await;
        if let Status::Missing(why) | Status::Failed(why) = &peer.status {
            eprintln!("sluice-bench: {} not measured: {why}", peer.name);
        }
        report.peers.push(peer);
    }
    context.upstream.stop(Duration::from_secs(3)).await;
    if plan.keep {
        eprintln!("sluice-bench: run directory kept: {}", tmp.keep().display());
    }
    report.machine.load_end = load_average();
    Ok(report)
}

/// A started peer: its route, its process (none for direct), what it must show.
struct Running {
    route: Arc<Route>,
    process: Option<Spawned>,
    expect: Expect,
}

async fn measure_peer(spec: &PeerSpec, context: &Context) -> PeerReport {
    let mut peer = PeerReport {
        name: spec.name().to_owned(),
        about: spec.about(),
        status: Status::Measured,
        phases: BTreeMap::new(),
        memory: None,
    };
    let running = match start(spec, context).await {
        Ok(running) => running,
        Err(Start::Missing(why)) => {
            peer.status = Status::Missing(why);
            return peer;
        }
        Err(Start::Failed(error)) => {
            peer.status = Status::Failed(error.to_string());
            return peer;
        }
    };
    let pid = running.process.as_ref().and_then(Spawned::pid);
    if let Some(pid) = pid {
        eprintln!("sluice-bench: {} runs as pid {pid}", peer.name);
    }
    if let Err(error) = sanity(&running, context).await {
        let tail = running
            .process
            .as_ref()
            .map(Spawned::stderr_tail)
            .unwrap_or_default();
        peer.status = Status::Failed(format!("{error}; stderr: {tail}"));
    } else {
        let idle = pid.and_then(child::memory);
        let selected = SCENARIOS.iter().filter(|s| {
            context.plan.phases.is_empty() || context.plan.phases.iter().any(|id| id == s.id)
        });
        for scenario in selected {
            let figures = phase(scenario, &running, pid, context).await;
            peer.phases.insert(scenario.id.to_owned(), figures);
            // Let closed connections and the proxy's queues settle between phases.
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let end = pid.and_then(child::memory);
        if let (Some(idle), Some(end)) = (idle, end) {
            peer.memory = Some(MemoryFigures {
                idle_kib: idle.rss_kib,
                peak_kib: end.hwm_kib,
            });
        }
    }
    if let Some(process) = running.process {
        process.stop(Duration::from_secs(3)).await;
    }
    peer
}

/// Why a peer did not start.
enum Start {
    Missing(String),
    Failed(BenchError),
}

impl From<BenchError> for Start {
    fn from(error: BenchError) -> Self {
        Self::Failed(error)
    }
}

async fn start(spec: &PeerSpec, context: &Context) -> Result<Running, Start> {
    let dir = context.dir.join(spec.name());
    std::fs::create_dir_all(&dir).map_err(BenchError::file(&dir))?;
    let stderr = dir.join("stderr");
    let foreign = HeaderValue::from_static(FOREIGN_PLACEHOLDER);
    let proxied = |process: &Spawned, ca: &Path, authorization: Option<String>| {
        Ok::<_, BenchError>(Route {
            proxy: Some(ProxyAccess {
                addr: process.addr(),
                authorization,
            }),
            tls: ClientTls::trusting(ca)?,
            upstream: context.upstream.addr(),
            authorization: foreign.clone(),
            headers: Vec::new(),
        })
    };
    match spec {
        PeerSpec::Direct => Ok(Running {
            route: Arc::new(Route {
                proxy: None,
                tls: ClientTls::trusting(&context.upstream_ca)?,
                upstream: context.upstream.addr(),
                authorization: foreign.clone(),
                headers: Vec::new(),
            }),
            process: None,
            expect: Expect::PassThrough,
        }),
        PeerSpec::Sluice(mode) => {
            let mut command = sluice_command(&context.exe);
            command
                .arg("sluice")
                .arg("--dir")
                .arg(&dir)
                .arg("--upstream-ca")
                .arg(&context.upstream_ca)
                .arg("--mode")
                .arg(match mode {
                    Mode::Full => "full",
                    Mode::Bare => "bare",
                    Mode::Passthrough => "passthrough",
                })
                .env(TOKEN_VAR, &context.value);
            let process = Spawned::start(spec.name(), command, &stderr, Ready::Line).await?;
            let read = |name: &str| crate::harness::read_trimmed(&dir, name);
            let proxy_auth = basic_auth(&read("proxy-url")?);
            let placeholder = read("placeholder")?;
            // Passthrough leaves the upstream's own certificate in front of the client.
            let ca = match mode {
                Mode::Passthrough => context.upstream_ca.clone(),
                Mode::Full | Mode::Bare => dir.join("ca.pem"),
            };
            let mut route = proxied(&process, &ca, Some(proxy_auth))?;
            let expect = match mode {
                Mode::Full => {
                    route.authorization =
                        HeaderValue::from_str(&format!("Bearer {placeholder}"))
                            .map_err(|e| BenchError::peer("sluice", format!("placeholder: {e}")))?;
                    Expect::Swap { placeholder }
                }
                Mode::Bare | Mode::Passthrough => Expect::PassThrough,
            };
            Ok(Running {
                route: Arc::new(route),
                process: Some(process),
                expect,
            })
        }
        PeerSpec::Hudsucker(binary) => {
            let binary = binary.clone().map_err(Start::Missing)?;
            let mut command = Command::new(&binary);
            command
                .arg("--dir")
                .arg(&dir)
                .arg("--upstream-ca")
                .arg(&context.upstream_ca);
            let process = Spawned::start(spec.name(), command, &stderr, Ready::Line).await?;
            let route = proxied(&process, &dir.join("ca.pem"), None)?;
            Ok(Running {
                route: Arc::new(route),
                process: Some(process),
                expect: Expect::PassThrough,
            })
        }
        PeerSpec::Mitmproxy(binary) => {
            let binary = binary.clone().map_err(Start::Missing)?;
            let addr = child::free_port()?;
            let ca = dir.join("mitmproxy-ca-cert.pem");
            let mut command = Command::new(&binary);
            command
                .arg("--quiet")
                .arg("--listen-host")
                .arg("127.0.0.1")
                .arg("--listen-port")
                .arg(addr.port().to_string())
                .arg("--set")
                .arg(format!("confdir={}", dir.display()))
                .arg("--set")
                .arg(format!(
                    "ssl_verify_upstream_trusted_ca={}",
                    context.upstream_ca.display()
                ))
                // Without this mitmproxy holds each whole body in memory before passing it on.
                .arg("--set")
                .arg("stream_large_bodies=1m");
            let ready = Ready::Port {
                addr,
                file: ca.clone(),
            };
            let process = Spawned::start(spec.name(), command, &stderr, ready).await?;
            let route = proxied(&process, &ca, None)?;
            Ok(Running {
                route: Arc::new(route),
                process: Some(process),
                expect: Expect::PassThrough,
            })
        }
    }
}

/// The first line of `mitmdump --version`, or the path when it does not answer.
fn version_line(binary: &Path) -> String {
    std::process::Command::new(binary)
        .arg("--version")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.lines().next().map(str::to_owned))
        .unwrap_or_else(|| binary.display().to_string())
}

/// `Basic base64(user:token)` from `http://user:token@host:port`.
pub(crate) fn basic_auth(proxy_url: &str) -> String {
    use base64::Engine;
    let rest = proxy_url.trim_start_matches("http://");
    let userinfo = rest.rsplit_once('@').map_or("", |(u, _)| u);
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(userinfo)
    )
}

/// One `GET /check` through the peer: sluice must have swapped the header and redacted the
/// echoed value; every other peer must pass both unchanged.
async fn sanity(running: &Running, context: &Context) -> Result<(), BenchError> {
    let route = &running.route;
    let mut sender = route.open(Proto::H1).await?;
    let answer = sender.get(route, "/check", true).await?;
    let body = String::from_utf8_lossy(&answer.body);
    let seen = answer.bench_auth.as_deref().unwrap_or("absent");
    let has_value = body.contains(&context.value);
    let fail = |why: String| BenchError::Sanity {
        peer: route
            .proxy
            .as_ref()
            .map_or_else(|| "direct".to_owned(), |p| p.addr.to_string()),
        why,
    };
    if answer.status != 200 {
        return Err(fail(format!(
            "GET /check answered {}, expected 200",
            answer.status
        )));
    }
    match &running.expect {
        Expect::Swap { placeholder } => {
            if seen != "real" {
                return Err(fail(format!(
                    "the upstream saw a {seen} Authorization, expected the real value (no swap)"
                )));
            }
            if has_value || !body.contains(placeholder.as_str()) {
                return Err(fail(
                    "the echoed value came back unredacted, expected its placeholder".to_owned(),
                ));
            }
        }
        Expect::PassThrough => {
            if seen != "other" || !has_value {
                return Err(fail(format!(
                    "the upstream saw a {seen} Authorization and the value came back {}; expected both unchanged",
                    if has_value { "intact" } else { "altered" }
                )));
            }
        }
    }
    Ok(())
}

/// Runs one phase against a running peer, with the proxy's CPU and memory around it.
async fn phase(
    scenario: &Scenario,
    running: &Running,
    pid: Option<u32>,
    context: &Context,
) -> Figures {
    let plan = &context.plan;
    let cpu_before = pid.and_then(child::cpu_ticks);
    let handshakes_before = upstream_handshakes(context).await;
    let sampling = Arc::new(AtomicBool::new(true));
    let rss_max = Arc::new(AtomicU64::new(0));
    let sampler = pid.map(|pid| {
        let sampling = sampling.clone();
        let rss_max = rss_max.clone();
        tokio::spawn(async move {
            while sampling.load(Ordering::Relaxed) {
                if let Some(memory) = child::memory(pid) {
                    rss_max.fetch_max(memory.rss_kib, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    });
    let route = running.route.clone();
    let tally = match scenario.kind {
        Kind::Small {
            proto,
            connections,
            streams,
        } => load::small(route, proto, connections, streams, plan.phase).await,
        Kind::Tunnels { concurrency } => load::tunnels(route, concurrency, plan.phase).await,
        Kind::Large => load::large(route, plan.large_limit).await,
    };
    sampling.store(false, Ordering::Relaxed);
    if let Some(sampler) = sampler {
        let _ = sampler.await;
    }
    let mut figures = Figures::from_tally(scenario.kind, tally);
    if let (Some(before), Some(after)) = (cpu_before, pid.and_then(child::cpu_ticks)) {
        figures.proxy_cpu_s =
            Some(after.saturating_sub(before) as f64 / context.ticks_per_second as f64);
    }
    if pid.is_some() {
        figures.proxy_rss_max_kib = Some(rss_max.load(Ordering::Relaxed));
    }
    if let (Some(before), Some(after)) = (handshakes_before, upstream_handshakes(context).await) {
        figures.upstream_handshakes = Some(after.saturating_sub(before));
    }
    if scenario.kind == Kind::Large && figures.completed > 0 {
        let expected = expected_large_bytes(plan.large_bytes, &running.expect, &context.value);
        if figures.bytes != expected {
            figures.fail(format!(
                "received {} body bytes, expected {expected}",
                figures.bytes
            ));
        }
    }
    figures
}

/// The `/large` body's size as the client should receive it: each value (one per block)
/// becomes the placeholder when sluice redacts.
fn expected_large_bytes(large: u64, expect: &Expect, value: &str) -> u64 {
    match expect {
        Expect::PassThrough => large,
        Expect::Swap { placeholder } => {
            let blocks = large / BLOCK as u64;
            (large + blocks * placeholder.len() as u64).saturating_sub(blocks * value.len() as u64)
        }
    }
}

/// TLS handshakes the upstream has completed, over the control connection (which is
/// reopened if the upstream closed it).
async fn upstream_handshakes(context: &Context) -> Option<u64> {
    let mut control = context.control.lock().await;
    let answer = match control.get(&context.control_route, "/stats", true).await {
        Ok(answer) => answer,
        Err(_) => {
            *control = context.control_route.open(Proto::H1).await.ok()?;
            control
                .get(&context.control_route, "/stats", true)
                .await
                .ok()?
        }
    };
    let text = String::from_utf8_lossy(&answer.body);
    text.lines()
        .find_map(|l| l.strip_prefix("handshakes "))?
        .trim()
        .parse()
        .ok()
}

fn machine() -> Machine {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines().find_map(|l| {
                l.strip_prefix("model name")?
                    .split_once(':')
                    .map(|(_, m)| m.trim().to_owned())
            })
        })
        .unwrap_or_else(|| "unknown".to_owned());
    let date = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    Machine {
        cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
        model,
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default(),
        load_start: load_average(),
        load_end: String::new(),
        date,
        diagnostics: ["SLUICE_BENCH_WRAP", "SLUICE_BENCH_WORKERS"]
            .into_iter()
            .filter_map(|name| Some(format!("{name}={}", std::env::var(name).ok()?)))
            .collect(),
    }
}

/// The 1, 5 and 15 minute load averages.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The command that starts a sluice peer: `exe` itself, or `exe` under the wrapper named
/// by `SLUICE_BENCH_WRAP` (whitespace-separated, e.g. `valgrind --tool=callgrind`), so that
/// a profiler can watch sluice alone while the harness drives it. A diagnostic: wrapped
/// figures are not comparable with unwrapped ones, and the report says so. The wrapper must
/// run sluice in its own process (valgrind does): the harness reads and signals the pid it
/// started, so a wrapper that forks (`perf record`, `strace -f`) would be measured and
/// stopped in sluice's place.
fn sluice_command(exe: &Path) -> Command {
    let wrap = std::env::var("SLUICE_BENCH_WRAP").unwrap_or_default();
    let mut words = wrap.split_whitespace();
    match words.next() {
        Some(program) => {
            let mut command = Command::new(program);
            command.args(words).arg(exe);
            command
        }
        None => Command::new(exe),
    }
}

/// A file a peer wrote into its run directory (`placeholder`, `proxy-url`, `admin-url`,
/// ...), without its trailing newline.
pub(crate) fn read_trimmed(dir: &std::path::Path, name: &str) -> Result<String, BenchError> {
    let path = dir.join(name);
    std::fs::read_to_string(&path)
        .map(|s| s.trim().to_owned())
        .map_err(BenchError::file(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_credentials_become_a_basic_header() {
        use base64::Engine;
        let header = basic_auth("http://sluice:tok3n@127.0.0.1:4000");
        let encoded = header.strip_prefix("Basic ").expect("basic");
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .expect("base64");
        assert_eq!(decoded, b"sluice:tok3n");
    }

    #[test]
    fn redaction_changes_the_large_body_by_the_placeholder_length() {
        let value = "v".repeat(42);
        let placeholder = "p".repeat(41);
        let large = 4 * BLOCK as u64;
        assert_eq!(
            expected_large_bytes(large, &Expect::PassThrough, &value),
            large
        );
        let swapped = Expect::Swap { placeholder };
        assert_eq!(expected_large_bytes(large, &swapped, &value), large - 4);
    }

    #[test]
    fn stand_in_values_differ_per_call_and_are_long_enough_to_redact() {
        let (a, b) = (stand_in_value("benchvalue"), stand_in_value("benchvalue"));
        assert_ne!(a, b);
        assert!(a.len() >= 16 && a.bytes().all(|c| c.is_ascii_alphanumeric()));
    }
}
