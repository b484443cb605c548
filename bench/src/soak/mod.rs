//! `sluice-bench soak`: sluice under mixed load and upstream faults for a fixed time, with
//! its invariants checked throughout.
//!
//! sluice runs as its own process (`sluice-bench sluice`, the library with `sluice serve`'s
//! runtime and workers, logging at `debug`), with a declaration that swaps one header toward
//! one host and redacts every response. The upstream ([`upstream`]) and the load
//! ([`load`]) run in this process. Every second the soak reads sluice's resident memory and
//! open file descriptors from `/proc`, and its stderr for a panic or the secret value. At
//! the end it stops sluice (which must exit 0), verifies the audit log's chain and searches
//! it for the value, and judges:
//!
//! - sluice never exited early and never panicked;
//! - the real value reached the upstream only as the granted header toward the granted
//!   host, and never in anything the client received, sluice's stderr or the audit log;
//! - no request sluice had to refuse arrived upstream, and no handshake with the
//!   wrong-certificate upstream completed;
//! - every kind of request got what it must, bar at most `--max-unexpected-percent`;
//! - after a warm-up (the first fifth of the run), resident memory stays within
//!   `--rss-growth-mib` of the warm-up's peak and open descriptors within `--fd-slack` of it.
//!
//! It never dials or listens beyond loopback.

mod answer;
mod body;
mod held;
mod load;
mod minted;
mod reload;
mod tunnel;
mod upstream;
mod values;
mod verdict;
mod websocket;

use std::io::{Read, Seek};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::process::Command;

use crate::child::{self, Ready, Spawned};
use crate::error::BenchError;
use crate::pki::ClientTls;
use crate::sluice_peer::SECRET;
use crate::upstream::TOKEN_VAR;
use body::StreamScan;
use load::{Client, KindTally};
use upstream::{BAD_TLS_HOST, GRANTED_HOST, UNGRANTED_HOST};
use verdict::{
    judge_audit, judge_held, judge_load, judge_minted, judge_resent, judge_resources,
    judge_upstream, judge_websockets, text,
};

/// What `sluice-bench soak` takes.
#[derive(Debug, clap::Args)]
pub(crate) struct SoakArgs {
    /// How long the load runs, in seconds.
    #[arg(long, default_value_t = 600)]
    secs: u64,
    /// Requests in flight at any time (one per worker).
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// How far resident memory may rise above the warm-up's peak, in MiB.
    #[arg(long, default_value_t = 16)]
    rss_growth_mib: u64,
    /// How far open file descriptors may rise above the warm-up's peak [default: 2 ×
    /// concurrency].
    #[arg(long)]
    fd_slack: Option<u64>,
    /// The share of requests that may get something other than their kind requires, in
    /// percent (a loaded machine may time out a few).
    #[arg(long, default_value_t = 1.0)]
    max_unexpected_percent: f64,
    /// Also write the summary as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Keep the run directory (sluice's stderr and audit log) and print its path.
    #[arg(long)]
    keep: bool,
    /// Reload sluice's declaration (`SIGHUP`) this often, in seconds; every fifth time
    /// with an invalid declaration, which must be refused [default: never].
    #[arg(long, value_name = "SECS")]
    reload_every: Option<f64>,
    /// Rotate the secret's value this often, in seconds: a new value in its file source,
    /// then `SIGHUP` [default: never].
    #[arg(long, value_name = "SECS")]
    rotate_every: Option<f64>,
    /// WebSockets held open for the whole run beside the load, each asking every 100 ms
    /// for every value (which must come back redacted), reconnecting when a reload closes
    /// it with 1012.
    #[arg(long, default_value_t = 2)]
    websockets: usize,
    /// HTTP/2 tunnels held open for the whole run beside the load, each asking `/echo`
    /// every 100 ms (redacted answers required), reopened when a reload sends GOAWAY.
    #[arg(long, default_value_t = 2)]
    held_tunnels: usize,
    /// Add a minted credential (`oauth2:`, client credentials) whose tokens, from the
    /// soak's own token endpoint, live this many seconds: sluice must refresh each before
    /// it expires [default: none].
    #[arg(long, value_name = "SECS")]
    mint_lifetime: Option<u64>,
    /// Rotate sluice's audit log into numbered segments once it holds this many bytes (at
    /// least 4096), so that rotations happen under the load and the reloads; the chain is
    /// then verified across every segment [default: no rotation].
    #[arg(long, value_name = "BYTES")]
    audit_max_bytes: Option<u64>,
}

/// One reading of sluice's process.
#[derive(Clone, Copy, Debug, serde::Serialize)]
struct Sample {
    /// Seconds since the load started.
    at_s: f64,
    /// Resident memory.
    rss_kib: u64,
    /// Open file descriptors.
    fds: u64,
}

/// Minimum and maximum of a figure over a stretch of the run.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
struct Range {
    min: u64,
    max: u64,
}

impl Range {
    fn of(values: impl Iterator<Item = u64>) -> Option<Range> {
        values.fold(None, |range: Option<Range>, v| {
            Some(range.map_or(Range { min: v, max: v }, |r| Range {
                min: r.min.min(v),
                max: r.max.max(v),
            }))
        })
    }
}

/// What the soak reports.
#[derive(Debug, Default, serde::Serialize)]
struct Summary {
    secs: f64,
    concurrency: usize,
    requests: u64,
    unexpected: u64,
    websockets: websocket::WsTally,
    held_tunnels: held::HeldTally,
    h1_requests: u64,
    h2_requests: u64,
    tunnels: u64,
    resent: u64,
    kinds: Vec<(String, KindTally)>,
    upstream_requests: u64,
    upstream_swaps: u64,
    bad_tls_attempts: u64,
    audit_events: u64,
    audit_swaps: u64,
    audit_refusals: u64,
    audit_redactions: u64,
    /// The files the audit log ended in (its segments and `audit.jsonl`).
    audit_files: u64,
    reloads_asked: reload::Reloads,
    reloads_in_force: u64,
    reloads_refused: u64,
    minted: Option<minted::MintTally>,
    /// Swaps of a retired value on a tunnel opened before its retirement (allowed: a tunnel
    /// keeps the declaration it was opened under).
    retired_swaps: u64,
    /// Swaps of a retired value on a tunnel opened after it (each is a violation).
    stale_swaps: u64,
    rss_warmup_kib: Range,
    rss_after_kib: Range,
    rss_bound_kib: u64,
    fds_warmup: Range,
    fds_after: Range,
    fd_bound: u64,
    samples: Vec<Sample>,
    violations: Vec<String>,
}

/// Runs the soak; exit 1 on any violation.
pub(crate) fn run(args: &SoakArgs) -> Result<ExitCode, BenchError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| BenchError::peer("soak", e))?;
    let summary = runtime.block_on(soak(args))?;
    println!("{}", text(&summary));
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&summary)
            .map_err(|e| BenchError::peer("soak", format!("JSON: {e}")))?;
        std::fs::write(path, json).map_err(BenchError::file(path))?;
    }
    if summary.violations.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        for violation in &summary.violations {
            eprintln!("sluice soak: VIOLATION: {violation}");
        }
        Ok(ExitCode::FAILURE)
    }
}

/// The declaration: one header of one host swapped, every response redacted; the other
/// two hosts reachable without the secret. A reload's `generation` (0 at start) allows one
/// more loopback address (a new name would be outside the run CA's name constraints), so
/// that each reload changes the declaration. `minted` is the minted secret's lines, if any.
fn declaration(value_file: &Path, minted: &str, generation: u64) -> String {
    let (high, low) = ((generation / 250) % 250 + 1, generation % 250 + 1);
    let value_file = value_file.display();
    format!(
        "version: 1\n\
         secrets:\n  \
           {SECRET}:\n    \
             from: {{ file: \"{value_file}\" }}\n    \
             hosts: [\"{GRANTED_HOST}\"]\n    \
             sinks: [egress]\n    \
             in: [header]\n    \
             header: [Authorization]\n\
         {minted}\
         egress:\n  \
           allow: [\"{UNGRANTED_HOST}\", \"{BAD_TLS_HOST}\"]\n  \
           allow_ips: [\"127.0.0.1/32\", \"127.1.{high}.{low}/32\"]\n"
    )
}

async fn soak(args: &SoakArgs) -> Result<Summary, BenchError> {
    let tmp = tempfile::tempdir().map_err(BenchError::file(std::env::temp_dir()))?;
    let dir = tmp.path().to_owned();
    let exe = std::env::current_exe().map_err(BenchError::file("current executable"))?;
    let value = crate::harness::stand_in_value("soakvalue");
    let values = values::Values::new(&value);
    let value_file = dir.join("value");
    std::fs::write(&value_file, &value).map_err(BenchError::file(&value_file))?;
    let upstream_ca = dir.join("upstream-ca.pem");
    let client_secret = crate::harness::stand_in_value("soakclient");
    let endpoint = args.mint_lifetime.map(|secs| {
        Arc::new(minted::Endpoint::new(
            Duration::from_secs(secs.max(1)),
            &client_secret,
        ))
    });
    let upstreams = upstream::start(&upstream_ca, values.clone(), endpoint.clone()).await?;
    let minted_lines = endpoint.as_ref().map_or(String::new(), |endpoint| {
        endpoint.declaration(GRANTED_HOST, upstreams.good.port())
    });
    let policy = dir.join("soak.yaml");
    std::fs::write(&policy, declaration(&value_file, &minted_lines, 0))
        .map_err(BenchError::file(&policy))?;
    let sluice_dir = dir.join("sluice");
    std::fs::create_dir_all(&sluice_dir).map_err(BenchError::file(&sluice_dir))?;
    let stderr_path = dir.join("sluice.stderr");
    let mut command = Command::new(&exe);
    command
        .arg("sluice")
        .arg("--dir")
        .arg(&sluice_dir)
        .arg("--upstream-ca")
        .arg(&upstream_ca)
        .arg("--policy")
        .arg(&policy)
        // Debug, so that every connection error sluice reports is searched for the value.
        .args(["--log", "info,sluice_proxy=debug"]);
    for host in [GRANTED_HOST, UNGRANTED_HOST, BAD_TLS_HOST] {
        command.arg("--pin").arg(host);
    }
    if let Some(bytes) = args.audit_max_bytes {
        command.arg("--audit-max-bytes").arg(bytes.to_string());
    }
    command
        .env(TOKEN_VAR, &value)
        .env(minted::CLIENT_SECRET_VAR, &client_secret)
        .env_remove("RUST_LOG");
    let mut sluice = Spawned::start("sluice", command, &stderr_path, Ready::Line).await?;
    let pid = sluice
        .pid()
        .ok_or_else(|| BenchError::peer("sluice", "exited right after starting"))?;
    let read = |name: &str| crate::harness::read_trimmed(&sluice_dir, name);
    let client = Arc::new(Client {
        proxy: sluice.addr(),
        proxy_auth: crate::harness::basic_auth(&read("proxy-url")?),
        tls: ClientTls::trusting(&sluice_dir.join("ca.pem"))?,
        placeholder: read("placeholder")?,
        minted_placeholder: match endpoint {
            Some(_) => Some(placeholder_of(
                &read("placeholders")?,
                minted::MINTED_SECRET,
            )?),
            None => None,
        },
        values: values.clone(),
        good_port: upstreams.good.port(),
        bad_tls_port: upstreams.bad_tls.port(),
    });
    let secs = args.secs.max(1);
    let concurrency = args.concurrency.max(1);
    eprintln!(
        "sluice soak: {secs} s at concurrency {concurrency}; sluice is pid {pid}; run directory {}",
        dir.display()
    );
    let mut violations = Vec::new();
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let held = tokio::spawn(held::run(
        client.clone(),
        args.held_tunnels,
        started + Duration::from_secs(secs),
        stop.clone(),
    ));
    let sockets = tokio::spawn(websocket::run(
        client.clone(),
        args.websockets,
        started + Duration::from_secs(secs),
        stop.clone(),
    ));
    let load = tokio::spawn(load::run(
        client,
        concurrency,
        started + Duration::from_secs(secs),
        stop.clone(),
    ));
    let every = |secs: Option<f64>| secs.map(|s| Duration::from_secs_f64(s.max(0.5)));
    let reloads = tokio::spawn(reload::run(reload::Plan {
        pid,
        policy: policy.clone(),
        declaration: {
            let value_file = value_file.clone();
            Box::new(move |generation| declaration(&value_file, &minted_lines, generation))
        },
        reload_every: every(args.reload_every),
        rotate_every: every(args.rotate_every),
        value_file: value_file.clone(),
        values: values.clone(),
        audit: sluice_dir.clone(),
        until: started + Duration::from_secs(secs),
        stop: stop.clone(),
    }));
    // Watch sluice once a second while the load runs.
    let mut samples = Vec::new();
    let mut stderr = StderrWatch::new(&stderr_path, &value);
    let mut last_progress = Instant::now();
    while !load.is_finished() {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if let Some(status) = sluice.exited() {
            violations.push(format!(
                "sluice exited during the soak ({status}); stderr: {}",
                sluice.stderr_tail()
            ));
            stop.store(true, Ordering::Relaxed);
            break;
        }
        if let Some(sample) = sample(pid, started) {
            samples.push(sample);
        }
        if let Some(problem) = stderr.scan() {
            violations.push(problem);
            stop.store(true, Ordering::Relaxed);
            break;
        }
        if last_progress.elapsed() >= Duration::from_secs(60) {
            last_progress = Instant::now();
            if let Some(last) = samples.last() {
                eprintln!(
                    "sluice soak: {:.0} s: RSS {} KiB, {} fds",
                    last.at_s, last.rss_kib, last.fds
                );
            }
        }
    }
    let tally = load.await.map_err(|e| BenchError::peer("soak load", e))?;
    let sockets = sockets
        .await
        .map_err(|e| BenchError::peer("soak websockets", e))?;
    let held = held
        .await
        .map_err(|e| BenchError::peer("soak held tunnels", e))?;
    let reloads_asked = reloads
        .await
        .map_err(|e| BenchError::peer("soak reloads", e))?;
    let elapsed = started.elapsed();
    // Stop sluice: it drains, writes `stop` to the audit log and must exit 0.
    match sluice.finish(Duration::from_secs(30)).await {
        Some(status) if status.success() => {}
        Some(status) => violations.push(format!("sluice exited with {status} when stopped")),
        None => violations.push("sluice did not exit within 30 s of being stopped".to_owned()),
    }
    if let Some(problem) = stderr.scan() {
        violations.push(problem);
    }
    let mut summary = Summary {
        secs: elapsed.as_secs_f64(),
        concurrency,
        ..Summary::default()
    };
    judge_load(&tally, args, &mut summary, &mut violations);
    judge_websockets(sockets, args, &mut summary, &mut violations);
    judge_held(held, args, &mut summary, &mut violations);
    judge_upstream(&upstreams.record, &mut summary, &mut violations);
    let every_value = values.all();
    judge_audit(&sluice_dir, &every_value, &mut summary, &mut violations);
    // Every value the secret had, in all sluice wrote on stderr (the watch during the run
    // looks for the first).
    let stderr_text = std::fs::read(&stderr_path).unwrap_or_default();
    if every_value.iter().any(|v| body::contains(&stderr_text, v)) {
        violations.push("a value (current or rotated) appeared in sluice's stderr".to_owned());
    }
    let audit = verdict::audit_text(&sluice_dir);
    let (in_force, refused, reload_violations) = reload::judge(&audit, reloads_asked);
    summary.reloads_asked = reloads_asked;
    summary.reloads_in_force = in_force;
    summary.reloads_refused = refused;
    violations.extend(reload_violations);
    judge_resent(&summary, &mut violations);
    if let Some(endpoint) = &endpoint {
        let secs = summary.secs;
        judge_minted(
            endpoint,
            secs,
            &audit,
            &stderr_text,
            &mut summary,
            &mut violations,
        );
    }
    judge_resources(
        &samples,
        secs,
        concurrency,
        args,
        &mut summary,
        &mut violations,
    );
    summary.samples = samples;
    summary.violations = violations;
    if args.keep {
        eprintln!("sluice soak: run directory kept: {}", tmp.keep().display());
    }
    Ok(summary)
}

/// `NAME`'s placeholder in the `placeholders` file (`name=placeholder` lines).
fn placeholder_of(placeholders: &str, name: &str) -> Result<String, BenchError> {
    placeholders
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix('='))
        .map(str::to_owned)
        .ok_or_else(|| BenchError::peer("sluice", format!("no placeholder for {name}")))
}

/// RSS and open descriptors of `pid` now.
fn sample(pid: u32, started: Instant) -> Option<Sample> {
    let memory = child::memory(pid)?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64;
    Some(Sample {
        at_s: started.elapsed().as_secs_f64(),
        rss_kib: memory.rss_kib,
        fds,
    })
}

/// Reads what sluice has added to its stderr since the last look, for a panic or the value.
struct StderrWatch<'a> {
    path: &'a Path,
    offset: u64,
    value: StreamScan<'a>,
    panic: StreamScan<'static>,
}

impl<'a> StderrWatch<'a> {
    fn new(path: &'a Path, value: &'a str) -> Self {
        Self {
            path,
            offset: 0,
            value: StreamScan::new(value.as_bytes()),
            panic: StreamScan::new(b"panicked"),
        }
    }

    fn scan(&mut self) -> Option<String> {
        let mut file = std::fs::File::open(self.path).ok()?;
        let mut fresh = Vec::new();
        file.seek(std::io::SeekFrom::Start(self.offset)).ok()?;
        file.read_to_end(&mut fresh).ok()?;
        self.offset += fresh.len() as u64;
        self.value.push(&fresh);
        self.panic.push(&fresh);
        if self.value.found() {
            Some("the real value appeared in sluice's stderr".to_owned())
        } else if self.panic.found() {
            Some(format!(
                "sluice panicked; its stderr: {}",
                String::from_utf8_lossy(&fresh)
                    .lines()
                    .find(|l| l.contains("panicked"))
                    .unwrap_or("(the line was in an earlier read)")
            ))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_generation_of_the_declaration_loads_cleanly_and_differs() {
        let endpoint = minted::Endpoint::new(Duration::from_secs(6), "client-secret");
        for minted in [String::new(), endpoint.declaration(GRANTED_HOST, 8443)] {
            generations_load_cleanly_and_differ(&minted);
        }
    }

    fn generations_load_cleanly_and_differ(minted: &str) {
        let mut hashes = std::collections::HashSet::new();
        for generation in [0, 1, 249, 250, 251, 100_000] {
            let loaded = sluice_policies::Policy::parse(
                &declaration(Path::new("/soak/value"), minted, generation),
                "soak.yaml",
            )
            .unwrap_or_else(|d| {
                panic!(
                    "{generation}: {:?}",
                    d.0.iter().map(ToString::to_string).collect::<Vec<_>>()
                )
            });
            assert!(loaded.warnings.is_empty());
            assert!(
                hashes.insert(declaration(Path::new("/soak/value"), minted, generation)),
                "{generation}"
            );
        }
    }

    #[test]
    fn ranges_span_their_values() {
        let range = Range::of([5, 3, 9].into_iter()).expect("values");
        assert_eq!((range.min, range.max), (3, 9));
        assert!(Range::of(std::iter::empty()).is_none());
    }
}
