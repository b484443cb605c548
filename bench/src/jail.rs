//! `sluice-bench jail`: what the jail costs, each figure against a baseline measured in the
//! same run.
//!
//! - **Transparent against explicit**: small GETs over HTTP/1.1 at 16 kept-alive
//!   connections, through one sluice, alternately by `CONNECT` (the explicit-proxy path)
//!   and by a connection nftables redirected to sluice's capture listener, named by its TLS
//!   server name (the path a client that ignores the proxy variables takes in the jail).
//!   Requests/s and sluice's CPU per request; each figure the median round's.
//! - **Start-up**: `sluice run --policy P -- true` with the jail and with `--no-jail`,
//!   alternately, the median of each.
//!
//! The throughput half runs in a user and network namespace of its own (`unshare -rn`), so
//! that the redirect is made without touching the machine's network: the load client dials
//! 127.0.0.2, which the rules send to the capture listener, exactly as the jail's rules do.
//! Nothing here dials beyond that namespace's loopback.

use std::path::PathBuf;
use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use http::HeaderValue;
use serde::{Deserialize, Serialize};

use crate::child;
use crate::error::BenchError;
use crate::harness::{basic_auth, stand_in_value};
use crate::load::{self, ProxyAccess, Route};
use crate::pki::{ClientTls, Proto};
use crate::upstream::TOKEN_VAR;

/// The capture listener's port inside the benchmark's namespace (its own: never taken).
const CAPTURE_PORT: u16 = 15001;

/// What `sluice-bench jail` takes.
#[derive(Debug, Args)]
pub(crate) struct JailArgs {
    /// The `sluice` binary whose start-up is measured.
    #[arg(long, value_name = "PATH", default_value = "target/release/sluice")]
    sluice: PathBuf,
    /// Rounds of each throughput phase; the median round is reported.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Seconds per throughput phase.
    #[arg(long, default_value_t = 3.0)]
    phase_secs: f64,
    /// Start-ups measured each way.
    #[arg(long, default_value_t = 20)]
    starts: usize,
    /// A quick check that the benchmark works (one short round, two start-ups each way);
    /// the targets are not judged.
    #[arg(long)]
    smoke: bool,
    /// Internal: already inside the benchmark's namespace; print the throughput figures
    /// as one JSON line.
    #[arg(long, hide = true)]
    inside: bool,
}

/// One path's throughput figures (the median round's).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
struct Throughput {
    requests_per_s: f64,
    cpu_us_per_request: f64,
    errors: u64,
}

/// Both paths, measured alternately through one sluice.
#[derive(Debug, Serialize, Deserialize)]
struct Paths {
    explicit: Throughput,
    transparent: Throughput,
}

/// Runs the benchmark (outside: start-up here, throughput in the namespace) and prints the
/// report.
pub(crate) fn run(args: &JailArgs) -> Result<ExitCode, BenchError> {
    if args.inside {
        let runtime = crate::harness::client_runtime()?;
        let paths = runtime.block_on(throughput(args))?;
        println!(
            "{}",
            serde_json::to_string(&paths).map_err(|e| BenchError::peer("harness", e))?
        );
        return Ok(ExitCode::SUCCESS);
    }
    let (rounds, phase_secs, starts) = if args.smoke {
        (1, 0.25, 2)
    } else {
        (args.rounds, args.phase_secs, args.starts)
    };
    let (jailed, unjailed) = startup(&args.sluice, starts)?;
    let exe = std::env::current_exe().map_err(BenchError::file("current executable"))?;
    let out = std::process::Command::new("unshare")
        .args(["-rn", "--"])
        .arg(&exe)
        .arg("jail")
        .arg("--inside")
        .arg("--rounds")
        .arg(rounds.to_string())
        .arg("--phase-secs")
        .arg(phase_secs.to_string())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| BenchError::peer("unshare", e))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let paths: Paths = serde_json::from_str(text.trim()).map_err(|e| {
        BenchError::peer(
            "harness",
            format!("the namespace's run printed {text:?} ({e})"),
        )
    })?;
    let report = render(&paths, jailed, unjailed);
    println!("{report}");
    if args.smoke {
        return Ok(ExitCode::SUCCESS);
    }
    let met = paths.transparent.requests_per_s >= 0.95 * paths.explicit.requests_per_s
        && paths.transparent.cpu_us_per_request <= 1.05 * paths.explicit.cpu_us_per_request
        && (jailed - unjailed) <= Duration::from_millis(30);
    Ok(if met {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

/// The Markdown report, with each target judged.
fn render(paths: &Paths, jailed: Duration, unjailed: Duration) -> String {
    let (e, t) = (paths.explicit, paths.transparent);
    let ratio = t.requests_per_s / e.requests_per_s;
    let cpu = t.cpu_us_per_request / e.cpu_us_per_request;
    let more = jailed.as_secs_f64() * 1e3 - unjailed.as_secs_f64() * 1e3;
    let judge = |ok: bool| if ok { "met" } else { "MISSED" };
    format!(
        "| path | requests/s | sluice CPU µs/request | errors |\n\
         |---|---:|---:|---:|\n\
         | explicit (CONNECT) | {:.0} | {:.1} | {} |\n\
         | transparent (redirected, SNI) | {:.0} | {:.1} | {} |\n\
         \n\
         | start-up, `sluice run -- true` (median) | ms |\n\
         |---|---:|\n\
         | `--no-jail` | {:.1} |\n\
         | jail | {:.1} |\n\
         \n\
         | target | measured | |\n\
         |---|---:|---|\n\
         | transparent ≥ 0.95× explicit requests/s | {ratio:.3}× | {} |\n\
         | transparent CPU per request within 5% | {cpu:.3}× | {} |\n\
         | jail start-up ≤ 30 ms more | {more:+.1} ms | {} |",
        e.requests_per_s,
        e.cpu_us_per_request,
        e.errors,
        t.requests_per_s,
        t.cpu_us_per_request,
        t.errors,
        unjailed.as_secs_f64() * 1e3,
        jailed.as_secs_f64() * 1e3,
        judge(ratio >= 0.95),
        judge(cpu <= 1.05),
        judge(more <= 30.0),
    )
}

/// The median start-up of `sluice run -- true` with the jail and with `--no-jail`.
fn startup(sluice: &std::path::Path, starts: usize) -> Result<(Duration, Duration), BenchError> {
    let dir = tempfile::tempdir().map_err(BenchError::file(std::env::temp_dir()))?;
    let policy = dir.path().join("policy.yaml");
    std::fs::write(&policy, crate::sluice_peer::declaration())
        .map_err(BenchError::file(&policy))?;
    let value = stand_in_value("benchvalue");
    let once = |jail: bool| -> Result<Duration, BenchError> {
        let mut command = std::process::Command::new(sluice);
        command
            .arg("run")
            .arg("--policy")
            .arg(&policy)
            .arg("--audit-log")
            .arg(dir.path().join("audit.jsonl"))
            .args(if jail { &[][..] } else { &["--no-jail"][..] })
            .args(["--", "true"])
            .env(TOKEN_VAR, &value)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let started = Instant::now();
        let status = command
            .status()
            .map_err(|e| BenchError::peer("sluice run", format!("{}: {e}", sluice.display())))?;
        let took = started.elapsed();
        if !status.success() {
            return Err(BenchError::peer(
                "sluice run",
                format!("exited {status} (jail: {jail})"),
            ));
        }
        Ok(took)
    };
    // One of each first, unmeasured: the page cache, the binary's first load.
    once(true)?;
    once(false)?;
    let (mut jailed, mut unjailed) = (Vec::new(), Vec::new());
    for _ in 0..starts.max(1) {
        jailed.push(once(true)?);
        unjailed.push(once(false)?);
    }
    Ok((median(&mut jailed), median(&mut unjailed)))
}

fn median(samples: &mut [Duration]) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Inside the namespace: loopback up, the jail's redirect rules, an upstream and one sluice;
/// then both paths, alternately.
async fn throughput(args: &JailArgs) -> Result<Paths, BenchError> {
    setup_network()?;
    let tmp = tempfile::tempdir().map_err(BenchError::file(std::env::temp_dir()))?;
    let dir = tmp.path();
    let exe = std::env::current_exe().map_err(BenchError::file("current executable"))?;
    let value = stand_in_value("benchvalue");
    let upstream = crate::upstream::spawn(&exe, dir, &value).await?;
    let sluice = crate::sluice_peer::spawn(&exe, dir, &value, |sluice| {
        sluice
            .arg("--transparent")
            .arg(format!("127.0.0.1:{CAPTURE_PORT}"));
    })
    .await?;
    let read = |name: &str| crate::harness::read_trimmed(dir, name);
    let authorization = HeaderValue::from_str(&format!("Bearer {}", read("placeholder")?))
        .map_err(|e| BenchError::peer("sluice", e))?;
    let explicit = Arc::new(Route {
        proxy: Some(ProxyAccess {
            addr: sluice.addr(),
            authorization: Some(basic_auth(&read("proxy-url")?)),
        }),
        tls: ClientTls::trusting(&dir.join("ca.pem"))?,
        upstream: upstream.addr(),
        authorization: authorization.clone(),
        headers: Vec::new(),
    });
    // The same upstream port at an address the rules redirect: named by its SNI.
    let transparent = Arc::new(Route {
        proxy: None,
        tls: ClientTls::trusting(&dir.join("ca.pem"))?,
        upstream: ([127, 0, 0, 2], upstream.addr().port()).into(),
        authorization,
        headers: Vec::new(),
    });
    let pid = sluice
        .pid()
        .ok_or_else(|| BenchError::peer("sluice", "no process id"))?;
    let phase = Duration::from_secs_f64(args.phase_secs);
    let ticks_per_second = child::clock_ticks_per_second() as f64;
    let (mut e, mut t) = (Vec::new(), Vec::new());
    for _ in 0..args.rounds.max(1) {
        for (route, figures) in [(&explicit, &mut e), (&transparent, &mut t)] {
            let before = child::cpu_ticks(pid).unwrap_or(0);
            let tally = load::small(route.clone(), Proto::H1, 16, 1, phase).await;
            let ticks = child::cpu_ticks(pid).unwrap_or(0).saturating_sub(before);
            let requests = tally.latencies_ns.len().max(1) as f64;
            figures.push(Throughput {
                requests_per_s: requests / tally.elapsed.as_secs_f64().max(1e-9),
                cpu_us_per_request: ticks as f64 / ticks_per_second * 1e6 / requests,
                errors: tally.errors,
            });
            if tally.latencies_ns.is_empty() {
                return Err(BenchError::peer(
                    "sluice",
                    format!(
                        "no request answered: {}; sluice: {}",
                        tally.first_error.unwrap_or_default(),
                        sluice.stderr_tail()
                    ),
                ));
            }
        }
    }
    sluice.stop(Duration::from_secs(3)).await;
    upstream.stop(Duration::from_secs(3)).await;
    Ok(Paths {
        explicit: median_round(&mut e),
        transparent: median_round(&mut t),
    })
}

/// The round with the median requests/s.
fn median_round(rounds: &mut [Throughput]) -> Throughput {
    rounds.sort_by(|a, b| a.requests_per_s.total_cmp(&b.requests_per_s));
    rounds[rounds.len() / 2]
}

/// Loopback up and the jail's rules: every TCP connection but to 127.0.0.1 redirected to
/// the capture port.
fn setup_network() -> Result<(), BenchError> {
    let status = std::process::Command::new("ip")
        .args(["link", "set", "lo", "up"])
        .status()
        .map_err(|e| BenchError::peer("ip", e))?;
    if !status.success() {
        return Err(BenchError::peer("ip", "cannot bring loopback up"));
    }
    let rules = format!(
        "table ip sluice_bench {{\n  chain output {{\n    type nat hook output priority -100; policy accept;\n    ip daddr 127.0.0.1 return\n    meta l4proto tcp redirect to :{CAPTURE_PORT}\n  }}\n}}\n"
    );
    let path = std::env::temp_dir().join(format!("sluice-bench-{}.nft", std::process::id()));
    std::fs::write(&path, rules).map_err(BenchError::file(&path))?;
    let status = std::process::Command::new("nft")
        .arg("-f")
        .arg(&path)
        .status();
    let _ = std::fs::remove_file(&path);
    match status {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(BenchError::peer("nft", format!("exited {status}"))),
        Err(e) => Err(BenchError::peer("nft", format!("{e} (install nftables)"))),
    }
}
