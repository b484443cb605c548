//! `sluice-bench`: sluice measured side by side with a direct connection (the limit),
//! hudsucker and mitmproxy, on loopback, in one run.
//!
//! The harness starts a TLS upstream (`/small`, a streamed `/large`), then each peer as its
//! own process, and drives it with a Rust load client (hyper over rustls, by CONNECT, with
//! keep-alive, at fixed concurrency, for a bounded time): small GETs over HTTP/1.1 and
//! HTTP/2, new tunnels, one large download with redaction active, and the proxy's peak
//! memory. It prints a Markdown report with every figure as a ratio to direct and to sluice,
//! and judges the targets of the benchmark issue. `bench/run.sh` builds everything and runs
//! it; `--smoke` is a seconds-long check that the harness works (direct and sluice only).
//!
//! The same binary plays the upstream (`sluice-bench upstream`) and sluice
//! (`sluice-bench sluice`, through `sluice_proxy::start`) when the harness starts it as a
//! child. `sluice-bench soak` is the hardening soak: sluice under mixed load and upstream
//! faults for a fixed time, its invariants checked throughout (see `soak`). It must never
//! dial or listen beyond loopback, and never run a phase unbounded.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

mod admin;
mod approvals;
mod audit_report;
mod child;
mod error;
mod grants;
mod harness;
mod jail;
mod listen;
mod load;
mod minted;
mod operations;
mod pair;
mod pki;
mod report;
mod signing;
mod sluice_peer;
mod soak;
mod upstream;
mod upstream_proxy;
mod websocket;

use harness::{PeerSpec, Plan};
use report::{Report, Status};
use sluice_peer::Mode;

/// sluice measured against a direct connection, hudsucker and mitmproxy, on loopback.
#[derive(Debug, Parser)]
#[command(
    name = "sluice-bench",
    args_conflicts_with_subcommands = true,
    args_override_self = true
)]
struct Cli {
    #[command(subcommand)]
    role: Option<Role>,
    #[command(flatten)]
    run: RunArgs,
}

/// The roles the harness starts this binary in, and the soak.
#[derive(Debug, Subcommand)]
enum Role {
    /// The TLS upstream (started by the harness).
    #[command(hide = true)]
    Upstream(upstream::UpstreamArgs),
    /// sluice, from the library (started by the harness).
    #[command(hide = true)]
    Sluice(sluice_peer::SluiceArgs),
    /// What the jail costs: the transparent path against the explicit one (requests/s and
    /// CPU per request at 16 connections), and `sluice run -- true` start-up with the jail
    /// against `--no-jail`.
    Jail(jail::JailArgs),
    /// What re-signing costs: a SigV4-signed GET against a header swap (CPU per request at
    /// 16 connections), and a signed aws-chunked upload against an unsigned one.
    Signing(signing::SigningArgs),
    /// What running sluice costs: CPU per request with the admin endpoint scraped every
    /// second against not, and reload and guard build times for 10, 100 and 1,000 secrets.
    Operations(operations::OperationsArgs),
    /// What finer grants cost: request rules weighed per request, 100 rules per secret
    /// against one.
    Grants(grants::GrantsArgs),
    /// What scanning WebSocket frames costs: an echo of 64 KiB messages through sluice
    /// inspecting every frame, against sluice tunnelling them uninspected (and direct).
    #[command(name = "websocket")]
    WebSocket(websocket::WebSocketArgs),
    /// What a minted credential (`oauth2:`) costs: a cached minted token's swap against a
    /// plain swap (CPU per request at 16 connections), and 64 connections across a token's
    /// expiry (token requests, the slowest request against one token round trip).
    Minted(minted::MintedArgs),
    /// What the reviewers' report costs: a 1,000,000-event log rendered, against
    /// `sluice audit verify` of the same log.
    AuditReport(audit_report::AuditReportArgs),
    /// What chaining to an egress proxy costs: small GETs through sluice → Squid against
    /// sluice direct (requests/s, latency, sluice's and Squid's CPU per request).
    UpstreamProxy(upstream_proxy::UpstreamProxyArgs),
    /// What a decision standing for the run costs (`approve:`): small GETs through a sluice
    /// whose secret waits for approval, allowed for the run, against one without.
    Approvals(approvals::ApprovalsArgs),
    /// A soak: sluice under mixed load and upstream faults for `--secs`, checking that it
    /// never panics or leaks the secret and that its memory and descriptors stay flat.
    Soak(soak::SoakArgs),
}

/// What a run takes.
#[derive(Debug, Args)]
struct RunArgs {
    /// A quick check that the harness works: direct and sluice only, phases of a fraction of
    /// a second, a 4 MiB body. Not a measurement.
    #[arg(long)]
    smoke: bool,
    /// The hudsucker peer binary (bench/run.sh builds bench/peers/hudsucker).
    #[arg(long, value_name = "PATH")]
    hudsucker: Option<PathBuf>,
    /// mitmproxy's `mitmdump` (bench/run.sh installs it into a virtual environment).
    #[arg(long, value_name = "PATH")]
    mitmdump: Option<PathBuf>,
    /// A peer that could not be installed, and why: `NAME=REASON` (reported as MISSING).
    #[arg(long = "missing", value_name = "NAME=REASON", value_parser = parse_missing)]
    missing: Vec<(String, String)>,
    /// Seconds per measured phase [default: 3, or 0.25 with --smoke].
    #[arg(long, value_name = "SECS")]
    phase_secs: Option<f64>,
    /// Size of the large body in MiB [default: 256, or 4 with --smoke].
    #[arg(long, value_name = "MIB")]
    large_mib: Option<u64>,
    /// Measure only these peers (comma-separated: direct, sluice, sluice-bare,
    /// sluice-passthrough, hudsucker, mitmproxy) [default: all, or direct and sluice with --smoke].
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    only: Vec<String>,
    /// Run only these phases (comma-separated ids: h1-c1, h1-c16, h1-c64, h2-s64,
    /// tunnels-c16, large) [default: all].
    #[arg(long, value_name = "IDS", value_delimiter = ',')]
    phases: Vec<String>,
    /// Make the upstream offer HTTP/1.1 only, so proxies' upstream legs use it (a
    /// diagnostic; direct's HTTP/2 phase then fails).
    #[arg(long)]
    upstream_h1_only: bool,
    /// Run every peer through every phase this many times; each figure reported is the
    /// median over the rounds [default: 1].
    #[arg(long, value_name = "N", default_value_t = 1)]
    rounds: usize,
    /// Keep the run directory (peers' stderr, sluice's audit log) and print its path.
    #[arg(long)]
    keep: bool,
    /// Also write the report (Markdown) to this file.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Also write every figure as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

fn parse_missing(s: &str) -> Result<(String, String), String> {
    let (name, reason) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not NAME=REASON"))?;
    match name {
        "hudsucker" | "mitmproxy" => Ok((name.to_owned(), reason.to_owned())),
        other => Err(format!(
            "{other:?} is not a peer that can be missing; expected hudsucker or mitmproxy"
        )),
    }
}

impl RunArgs {
    fn plan(&self) -> Result<Plan, String> {
        for id in &self.phases {
            if !report::SCENARIOS.iter().any(|s| s.id == id) {
                let known: Vec<&str> = report::SCENARIOS.iter().map(|s| s.id).collect();
                return Err(format!(
                    "--phases: {id:?} is not a phase; expected one of {}",
                    known.join(", ")
                ));
            }
        }
        let missing = |name: &str| {
            self.missing
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, why)| why.clone())
        };
        let peer = |name: &str, path: &Option<PathBuf>, how: &str| match (missing(name), path) {
            (Some(why), _) => Err(why),
            (None, Some(path)) => Ok(path.clone()),
            (None, None) => Err(format!("not given: {how}")),
        };
        let mut peers = vec![PeerSpec::Direct, PeerSpec::Sluice(Mode::Full)];
        if !self.smoke || !self.only.is_empty() {
            peers.push(PeerSpec::Sluice(Mode::Bare));
            peers.push(PeerSpec::Sluice(Mode::Passthrough));
            peers.push(PeerSpec::Hudsucker(peer(
                "hudsucker",
                &self.hudsucker,
                "bench/run.sh builds it and passes --hudsucker",
            )));
            peers.push(PeerSpec::Mitmproxy(peer(
                "mitmproxy",
                &self.mitmdump,
                "bench/run.sh installs it and passes --mitmdump",
            )));
        }
        if !self.only.is_empty() {
            for name in &self.only {
                if !peers.iter().any(|p| p.name() == name) {
                    let known: Vec<&str> = peers.iter().map(PeerSpec::name).collect();
                    return Err(format!(
                        "--only: {name:?} is not a peer; expected one of {}",
                        known.join(", ")
                    ));
                }
            }
            peers.retain(|p| self.only.iter().any(|name| name == p.name()));
        }
        let phase = self
            .phase_secs
            .unwrap_or(if self.smoke { 0.25 } else { 3.0 });
        let large_mib = self
            .large_mib
            .unwrap_or(if self.smoke { 4 } else { 256 })
            .max(1);
        Ok(Plan {
            smoke: self.smoke,
            phase: Duration::from_secs_f64(phase.clamp(0.05, 60.0)),
            large_bytes: large_mib * upstream::BLOCK as u64,
            large_limit: Duration::from_secs(if self.smoke { 20 } else { 30 }),
            peers,
            phases: self.phases.clone(),
            keep: self.keep,
            upstream_h1_only: self.upstream_h1_only,
        })
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.role {
        Some(Role::Upstream(args)) => upstream::run(args).map(|()| ExitCode::SUCCESS),
        Some(Role::Sluice(args)) => sluice_peer::run(args).map(|()| ExitCode::SUCCESS),
        Some(Role::Soak(args)) => soak::run(args),
        Some(Role::Jail(args)) => jail::run(args),
        Some(Role::Signing(args)) => signing::run(args),
        Some(Role::Operations(args)) => operations::run(args),
        Some(Role::AuditReport(args)) => audit_report::run(args),
        Some(Role::Grants(args)) => grants::run(args),
        Some(Role::Minted(args)) => minted::run(args),
        Some(Role::WebSocket(args)) => websocket::run(args),
        Some(Role::UpstreamProxy(args)) => upstream_proxy::run(args),
        Some(Role::Approvals(args)) => approvals::run(args),
        None => run(&cli.run),
    };
    result.unwrap_or_else(|error| {
        eprintln!("sluice-bench: {error}");
        ExitCode::FAILURE
    })
}

fn run(args: &RunArgs) -> Result<ExitCode, error::BenchError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| error::BenchError::peer("harness", e))?;
    let plan = match args.plan() {
        Ok(plan) => plan,
        Err(why) => {
            eprintln!("sluice-bench: {why}");
            return Ok(ExitCode::from(2));
        }
    };
    let mut rounds = Vec::new();
    for round in 1..=args.rounds.max(1) {
        if args.rounds > 1 {
            eprintln!("sluice-bench: round {round} of {}", args.rounds);
        }
        rounds.push(runtime.block_on(harness::run(plan.clone()))?);
    }
    let Some(report) = Report::median_of(rounds) else {
        return Ok(ExitCode::from(2));
    };
    let markdown = report.markdown();
    println!("{markdown}");
    if let Some(path) = &args.out {
        std::fs::write(path, &markdown).map_err(error::BenchError::file(path))?;
    }
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report)
            .map_err(|e| error::BenchError::peer("harness", format!("JSON: {e}")))?;
        std::fs::write(path, json).map_err(error::BenchError::file(path))?;
    }
    Ok(verdict(&report))
}

/// Exit 1 when the baseline or sluice itself did not measure cleanly: the figures of the
/// others are only worth reading against those two.
fn verdict(report: &Report) -> ExitCode {
    let mut clean = true;
    for peer in report
        .peers
        .iter()
        .filter(|p| p.name == "direct" || p.name == "sluice")
    {
        if !matches!(peer.status, Status::Measured) {
            eprintln!(
                "sluice-bench: {} was not measured: {:?}",
                peer.name, peer.status
            );
            clean = false;
            continue;
        }
        for (id, figures) in &peer.phases {
            if figures.completed == 0 || figures.errors > 0 || figures.timed_out {
                eprintln!(
                    "sluice-bench: {} / {id}: {} completed, {} errors ({}){}",
                    peer.name,
                    figures.completed,
                    figures.errors,
                    figures.first_error.as_deref().unwrap_or("none"),
                    if figures.timed_out {
                        ", cut at its bound"
                    } else {
                        ""
                    }
                );
                clean = false;
            }
        }
    }
    if clean {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
