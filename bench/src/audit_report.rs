//! `sluice-bench audit-report`: what the reviewers' report costs on a large log, against
//! `sluice audit verify` of the same log in the same run (the chain check every reader
//! pays; the report adds its aggregates and the page).
//!
//! The log is written by sluice's own writer, rotated into 64 MiB segments as a busy sidecar
//! would: a mix of swaps toward a few granted hosts, redactions, refusals across many
//! reasons and paths, denials of ever-new hosts (a sandbox probing), and failed logins, so
//! the capped lists have more to cap than they show. Targets (issue #22): 1,000,000 events
//! render in at most 10 s into at most 2 MiB.

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use clap::Args;
use sluice_audit::{self as audit, AuditLog, Event, EventKind, Rotation, StartInfo};

use crate::error::BenchError;

/// What `sluice-bench audit-report` takes.
#[derive(Debug, Args)]
pub(crate) struct AuditReportArgs {
    /// Events in the log.
    #[arg(long, default_value_t = 1_000_000)]
    events: u64,
    /// A quick check that the benchmark works (20,000 events); the targets are not judged.
    #[arg(long)]
    smoke: bool,
}

const TARGET_SECS: f64 = 10.0;
const TARGET_BYTES: usize = 2 * 1024 * 1024;

/// Runs the benchmark and prints the report; exit 2 when a target is missed.
pub(crate) fn run(args: &AuditReportArgs) -> Result<ExitCode, BenchError> {
    let events = if args.smoke { 20_000 } else { args.events };
    let dir = tempfile::tempdir().map_err(|e| BenchError::peer("tempdir", e))?;
    let path = dir.path().join("audit.jsonl");
    let written = Instant::now();
    write_log(&path, events)?;
    let write_s = written.elapsed().as_secs_f64();
    let paths = [dir.path().to_owned()];

    let verified = Instant::now();
    let logs = audit::verify_logs(&paths).map_err(|e| BenchError::peer("verify", e))?;
    let verify_s = verified.elapsed().as_secs_f64();
    if logs.iter().any(|log| log.broken.is_some()) {
        return Err(BenchError::peer(
            "verify",
            "the written log does not verify",
        ));
    }

    let rendered = Instant::now();
    let report = audit::report::build(&paths).map_err(|e| BenchError::peer("report", e))?;
    let html = report
        .to_html()
        .map_err(|e| BenchError::peer("report", e))?;
    let report_s = rendered.elapsed().as_secs_f64();
    let json = serde_json::to_string(&report).map_err(|e| BenchError::peer("report", e))?;
    let log_bytes: u64 = std::fs::read_dir(dir.path())
        .map_err(|e| BenchError::peer("log", e))?
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum();
    let segments = logs.first().map_or(0, |log| log.files.len());

    println!("# sluice-bench audit-report\n");
    println!(
        "A log of {} events ({:.0} MiB in {segments} segments, written in {write_s:.1} s).\n",
        report.totals.lines,
        log_bytes as f64 / (1024.0 * 1024.0)
    );
    println!("| step | seconds | vs verify |");
    println!("|---|---:|---:|");
    println!("| `sluice audit verify` (the chain alone) | {verify_s:.2} | 1.00× |");
    println!(
        "| `sluice audit report` (chain, aggregates, page) | {report_s:.2} | {:.2}× |",
        report_s / verify_s.max(1e-9)
    );
    println!(
        "\nPage: {} bytes ({:.2} MiB); JSON: {} bytes.\n",
        html.len(),
        html.len() as f64 / (1024.0 * 1024.0),
        json.len()
    );
    let time_ok = report_s <= TARGET_SECS;
    let size_ok = html.len() <= TARGET_BYTES;
    if args.smoke {
        println!("Smoke run: targets not judged.");
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "Target: {} events render in at most {TARGET_SECS} s: {}; into at most 2 MiB: {}.",
        events,
        if time_ok { "met" } else { "MISSED" },
        if size_ok { "met" } else { "MISSED" }
    );
    Ok(if time_ok && size_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

/// Writes `events` events (plus `start` and `stop`) through sluice's writer.
fn write_log(path: &Path, events: u64) -> Result<(), BenchError> {
    let start = StartInfo {
        policy_sha256: "ab".repeat(32),
        ca_sha256: "cd".repeat(32),
        withheld: vec!["AWS_SECRET_ACCESS_KEY".to_owned()],
        placeholders: Default::default(),
        settings: Default::default(),
        grants: Default::default(),
    };
    let rotation = Rotation {
        max_bytes: Some(64 * 1024 * 1024),
        max_age: None,
    };
    let log = AuditLog::open_with(path, "bench-report", start, None, rotation)
        .map_err(|e| BenchError::peer("audit log", e))?;
    let secrets = [
        "github_token",
        "openai_key",
        "npm_token",
        "aws.access_key_id",
    ];
    let hosts = [
        "api.github.com",
        "api.openai.com",
        "registry.npmjs.org",
        "s3.amazonaws.com",
    ];
    for i in 0..events {
        let s = (i % 4) as usize;
        let event = match i % 20 {
            0..=11 => Event::new(EventKind::Swap)
                .secret(secrets[s])
                .host(hosts[s])
                .method("GET")
                .path(format!("/repos/acme/app/issues/{}?page={i}", i % 5000))
                .location("header:authorization"),
            12..=15 => Event::new(EventKind::Redact)
                .secret(secrets[s])
                .host(hosts[s])
                .count(1 + i % 3),
            16 | 17 => Event::new(EventKind::Refuse)
                .secret(secrets[s])
                .host(format!("paste{}.example", i % 300))
                .method("POST")
                .path(format!("/api/{}", i % 10_000))
                .location("body")
                .reason(
                    [
                        "placeholder-not-granted",
                        "secret-value-refused",
                        "bad-request",
                    ][(i % 3) as usize],
                ),
            18 => Event::new(EventKind::Deny)
                .host(format!("probe-{i}.example:443"))
                .reason("host-not-allowed"),
            _ => Event::new(EventKind::AuthFail).reason("proxy-auth-required"),
        };
        // The writer's queue is bounded (a proxy that outruns its disk fails closed): pace.
        while log.queued() > audit::QUEUE_CAPACITY / 2 {
            std::thread::yield_now();
        }
        log.record(event)
            .map_err(|e| BenchError::peer("audit log", e))?;
    }
    log.close().map_err(|e| BenchError::peer("audit log", e))
}
