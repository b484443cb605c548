//! `sluice-bench upstream-proxy`: what chaining to an organisation's egress proxy costs.
//!
//! Two sluices from the same declaration (one header swapped, every response redacted),
//! one dialling the upstream directly and one through a real Squid (Debian's `squid`,
//! started on 127.0.0.1 by the integration tests' `squid` module, caching off), each
//! driven in turn, round after round, with small GETs over HTTP/1.1 at 16 kept-alive
//! connections. Reported: requests/s, median and p99 latency, sluice's CPU per request
//! and Squid's. There is no target (issue #41): the figure says what the extra hop costs
//! on this machine. Squid shares the two cores with everything else, so its CPU is part of
//! what the chained figures pay for.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Args;

use sluice_integration_tests::squid::{Squid, SquidConfig};

use crate::error::BenchError;
use crate::harness::stand_in_value;
use crate::pair::{Gets, Peer, median};
use crate::pki::UPSTREAM_HOST;

/// What `sluice-bench upstream-proxy` takes.
#[derive(Debug, Args)]
pub(crate) struct UpstreamProxyArgs {
    /// Rounds; each figure is the median round's.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Seconds per phase.
    #[arg(long, default_value_t = 3.0)]
    phase_secs: f64,
    /// A quick check that the benchmark works (short phases, one round).
    #[arg(long)]
    smoke: bool,
}

/// Runs the benchmark and prints the report; exit 1 when a route answered nothing.
pub(crate) fn run(args: &UpstreamProxyArgs) -> Result<ExitCode, BenchError> {
    if !Squid::installed() {
        return Err(BenchError::peer(
            "squid",
            "Debian's squid is missing (./test.sh installs it)",
        ));
    }
    let runtime = crate::harness::client_runtime()?;
    let (rounds, phase) = if args.smoke {
        (1, Duration::from_millis(300))
    } else {
        (args.rounds.max(1), Duration::from_secs_f64(args.phase_secs))
    };
    let (direct, chained) = runtime.block_on(measure(rounds, phase))?;
    println!("{}", render(direct, chained));
    Ok(if direct.errors == 0 && chained.errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn render(direct: Gets, chained: Gets) -> String {
    let row = |name: &str, g: Gets| {
        format!(
            "| {name} | {:.0} | {:.2} | {:.2} | {:.1} | {:.1} | {} |\n",
            g.requests_per_s, g.median_ms, g.p99_ms, g.sluice_cpu_us, g.helper_cpu_us, g.errors
        )
    };
    format!(
        "| GET /small, HTTP/1.1, 16 connections | requests/s | median ms | p99 ms | sluice CPU µs/request | Squid CPU µs/request | errors |\n\
         |---|---:|---:|---:|---:|---:|---:|\n\
         {}{}\n\
         through Squid: {:.2}× the requests/s of direct, sluice's CPU {:+.1} µs/request, \
         Squid's {:.1} µs/request (no target)",
        row("sluice → upstream", direct),
        row("sluice → Squid → upstream", chained),
        chained.requests_per_s / direct.requests_per_s.max(1e-9),
        chained.sluice_cpu_us - direct.sluice_cpu_us,
        chained.helper_cpu_us,
    )
}

async fn measure(rounds: usize, phase: Duration) -> Result<(Gets, Gets), BenchError> {
    let tmp = tempfile::tempdir().map_err(BenchError::file(std::env::temp_dir()))?;
    let dir = tmp.path();
    let exe = std::env::current_exe().map_err(BenchError::file("current executable"))?;
    let value = stand_in_value("benchvalue");
    let upstream = crate::upstream::spawn(&exe, dir, &value).await?;
    // The integration tests' Squid: caching off, the upstream's name from its own hosts file.
    let squid = Squid::start(&SquidConfig {
        hosts: &[UPSTREAM_HOST],
        user: None,
        denied: None,
    });
    let tunnels = || squid.access_log().lines().count();
    let direct = Peer::start(&exe, &dir.join("direct"), &value, &upstream, |_| {}).await?;
    let port = squid.port();
    let chained = Peer::start(&exe, &dir.join("chained"), &value, &upstream, |sluice| {
        sluice
            .arg("--upstream-proxy")
            .arg(format!("http://127.0.0.1:{port}"));
    })
    .await?;
    let (mut directs, mut chaineds) = (Vec::new(), Vec::new());
    let mut failure = None;
    'rounds: for _ in 0..rounds {
        for (peer, figures) in [(&direct, &mut directs), (&chained, &mut chaineds)] {
            match peer.round(Some(squid.pid()), phase).await {
                Ok(gets) => figures.push(gets),
                Err(e) => {
                    failure = Some(e);
                    break 'rounds;
                }
            }
        }
    }
    direct.sluice.stop(Duration::from_secs(3)).await;
    chained.sluice.stop(Duration::from_secs(3)).await;
    upstream.stop(Duration::from_secs(3)).await;
    if let Some(e) = failure {
        return Err(e);
    }
    // Squid logs a tunnel when it closes: the chained sluice's upstream connections, now
    // that it has stopped (none of the direct one's).
    let deadline = Instant::now() + Duration::from_secs(3);
    while tunnels() == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if tunnels() == 0 {
        return Err(BenchError::peer(
            "squid",
            "its access log shows no connection: the chained sluice did not go through it",
        ));
    }
    Ok((median(&mut directs), median(&mut chaineds)))
}
