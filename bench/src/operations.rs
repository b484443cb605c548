//! `sluice-bench operations`: what running sluice for real costs, each figure against a
//! baseline measured in the same run.
//!
//! - **Scraped against not**: small GETs over HTTP/1.1 at 16 kept-alive connections through
//!   one sluice with its admin endpoint on, in rounds that alternate between no scraper and a
//!   scraper fetching `/metrics` every second (as Prometheus would, with the admin
//!   credentials). sluice's CPU per request (its process's CPU time); the target is judged
//!   on the median of each round pair's ratio. Beside it, what one scrape costs with no
//!   load. The counters are always on: what is measured is what the page costs to serve.
//! - **Reload and guard build for 10, 100 and 1,000 secrets**: a proxy in this process,
//!   started from a declaration file of N secrets (each read from a file of its own), reloaded
//!   (`Proxy::reload`: the file read and checked, every source read, the guard and signers
//!   built, put in force, audited) twice each time: with nothing changed (the guard is kept)
//!   and with one value rotated (the guard is built again); and the guard alone
//!   (`Policy::build_guard`). The median of a few of each. Values are random, as real ones
//!   are (values sharing a prefix build faster).

use std::net::{Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use http::HeaderValue;
use sluice_policies::Policy;

use crate::admin::Admin;
use crate::child;
use crate::error::BenchError;
use crate::harness::{basic_auth, stand_in_value};
use crate::load::{self, ProxyAccess, Route};
use crate::pki::{ClientTls, Proto};

/// What `sluice-bench operations` takes.
#[derive(Debug, Args)]
pub(crate) struct OperationsArgs {
    /// Rounds of each phase; the median round is reported.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Seconds per load phase.
    #[arg(long, default_value_t = 4.0)]
    phase_secs: f64,
    /// A quick check that the benchmark works (one short round, 10 and 100 secrets); the
    /// targets are not judged.
    #[arg(long)]
    smoke: bool,
}

/// One load phase's figures.
#[derive(Debug, Clone, Copy, Default)]
struct Phase {
    requests_per_s: f64,
    cpu_us_per_request: f64,
    errors: u64,
    scrapes: usize,
}

/// Reload and guard build times for one declaration size, in milliseconds.
#[derive(Debug, Clone, Copy)]
struct Sized {
    secrets: usize,
    /// A reload that changes nothing the guard is built from (the guard is kept).
    reload_ms: f64,
    /// A reload with one secret's value rotated (the guard is built again).
    rotated_ms: f64,
    guard_ms: f64,
}

/// Runs the benchmark and prints the report; exit 2 when a target is missed.
pub(crate) fn run(args: &OperationsArgs) -> Result<ExitCode, BenchError> {
    let runtime = crate::harness::client_runtime()?;
    let (rounds, phase, sizes): (usize, Duration, &[usize]) = if args.smoke {
        (1, Duration::from_millis(1200), &[10, 100])
    } else {
        (
            args.rounds.max(1),
            Duration::from_secs_f64(args.phase_secs),
            &[10, 100, 1000],
        )
    };
    let scraping = runtime.block_on(scrape_cost(rounds, phase))?;
    let reloads = runtime.block_on(reload_times(sizes, if args.smoke { 1 } else { 5 }))?;
    println!("{}", render(&scraping, &reloads));
    if args.smoke {
        return Ok(ExitCode::SUCCESS);
    }
    let at_1000 = reloads.iter().find(|s| s.secrets == 1000);
    let met = scraping.ratio <= 1.03
        && at_1000.is_some_and(|s| s.reload_ms <= 100.0 && s.rotated_ms <= 100.0);
    Ok(if met {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

fn render(scraping: &Scraping, reloads: &[Sized]) -> String {
    let judge = |ok: bool| if ok { "met" } else { "MISSED" };
    let (quiet, scraped) = (scraping.quiet, scraping.scraped);
    // One scrape a second, against the CPU a second of the unscraped load took.
    let share = scraping.scrape_us / (quiet.requests_per_s * quiet.cpu_us_per_request);
    let mut out = format!(
        "| GET /small, HTTP/1.1, 16 connections | requests/s | sluice CPU µs/request | errors | scrapes |\n\
         |---|---:|---:|---:|---:|\n\
         | admin endpoint on, not scraped (median round) | {:.0} | {:.1} | {} | {} |\n\
         | `/metrics` scraped every second (median round) | {:.0} | {:.1} | {} | {} |\n\
         \n\
         One scrape costs sluice {:.0} µs of CPU (200 in a row, no load): at one a second, \
         {:.3}% of the CPU the unscraped load took.\n\
         \n\
         | secrets | reload, nothing changed (ms) | reload, one value rotated (ms) | guard build (ms) |\n\
         |---:|---:|---:|---:|\n",
        quiet.requests_per_s,
        quiet.cpu_us_per_request,
        quiet.errors,
        quiet.scrapes,
        scraped.requests_per_s,
        scraped.cpu_us_per_request,
        scraped.errors,
        scraped.scrapes,
        scraping.scrape_us,
        share * 100.0,
    );
    for size in reloads {
        out.push_str(&format!(
            "| {} | {:.1} | {:.1} | {:.1} |\n",
            size.secrets, size.reload_ms, size.rotated_ms, size.guard_ms
        ));
    }
    out.push_str(&format!(
        "\n| target | measured | |\n|---|---:|---|\n\
         | scraped CPU/request within 3% of not scraped (median of the round pairs) | {:.3}× | {} |\n",
        scraping.ratio,
        judge(scraping.ratio <= 1.03)
    ));
    if let Some(size) = reloads.iter().find(|s| s.secrets == 1000) {
        out.push_str(&format!(
            "| reload of 1,000 secrets ≤ 100 ms (nothing changed; one rotated) | {:.1} ms; {:.1} ms | {}; {} |",
            size.reload_ms,
            size.rotated_ms,
            judge(size.reload_ms <= 100.0),
            judge(size.rotated_ms <= 100.0)
        ));
    }
    out
}

/// Rounds of the load, alternately without and with a scraper; the median of each.
async fn scrape_cost(rounds: usize, phase: Duration) -> Result<Scraping, BenchError> {
    let tmp = tempfile::tempdir().map_err(BenchError::file(std::env::temp_dir()))?;
    let dir = tmp.path();
    let exe = std::env::current_exe().map_err(BenchError::file("current executable"))?;
    let value = stand_in_value("benchvalue");
    let upstream = crate::upstream::spawn(&exe, dir, &value).await?;
    let sluice = crate::sluice_peer::spawn(&exe, dir, &value, |sluice| {
        sluice.arg("--admin");
    })
    .await?;
    let read = |name: &str| crate::harness::read_trimmed(dir, name);
    let admin = Admin::from_url(&read("admin-url")?)?;
    let route = Arc::new(Route {
        proxy: Some(ProxyAccess {
            addr: sluice.addr(),
            authorization: read("proxy-url").ok().map(|url| basic_auth(&url)),
        }),
        tls: ClientTls::trusting(&dir.join("ca.pem"))?,
        upstream: upstream.addr(),
        authorization: HeaderValue::from_str(&format!("Bearer {}", read("placeholder")?))
            .map_err(|e| BenchError::peer("sluice", e))?,
        headers: Vec::new(),
    });
    let pid = sluice
        .pid()
        .ok_or_else(|| BenchError::peer("sluice", "no process id"))?;
    let ticks_per_second = child::clock_ticks_per_second() as f64;
    let cpu = || child::cpu_ticks(pid).unwrap_or(0) as f64 / ticks_per_second;
    let (mut quiet, mut scraped, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        // Each pair in the other order from the last, so that neither phase always comes
        // second (a warmer machine, a fuller pool).
        let order = if round % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        let mut pair = [None, None];
        for scraping in order {
            let scraper = scraping.then(|| admin.scrape_every(Duration::from_secs(1)));
            let before = cpu();
            let tally = load::small(route.clone(), Proto::H1, 16, 1, phase).await;
            let spent = cpu() - before;
            let scrapes = match scraper {
                Some(scraper) => scraper.stop().await?,
                None => 0,
            };
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
            let requests = tally.latencies_ns.len() as f64;
            let figures = Phase {
                requests_per_s: requests / tally.elapsed.as_secs_f64().max(1e-9),
                cpu_us_per_request: spent * 1e6 / requests,
                errors: tally.errors,
                scrapes,
            };
            pair[usize::from(scraping)] = Some(figures);
            if scraping {
                scraped.push(figures);
            } else {
                quiet.push(figures);
            }
        }
        if let [Some(without), Some(with)] = pair {
            ratios.push(with.cpu_us_per_request / without.cpu_us_per_request);
        }
    }
    // What one scrape costs sluice, with nothing else going on.
    const SCRAPES: usize = 200;
    let before = cpu();
    for _ in 0..SCRAPES {
        admin.scrape().await?;
    }
    let scrape_us = (cpu() - before) * 1e6 / SCRAPES as f64;
    sluice.stop(Duration::from_secs(3)).await;
    upstream.stop(Duration::from_secs(3)).await;
    Ok(Scraping {
        quiet: median(&mut quiet),
        scraped: median(&mut scraped),
        ratio: median_of(&mut ratios),
        scrape_us,
    })
}

/// The scrape comparison's figures.
#[derive(Debug, Clone, Copy)]
struct Scraping {
    /// The median unscraped and scraped rounds.
    quiet: Phase,
    scraped: Phase,
    /// The median of each round pair's scraped / unscraped CPU per request.
    ratio: f64,
    /// sluice's CPU per scrape, with no load.
    scrape_us: f64,
}

fn median(rounds: &mut [Phase]) -> Phase {
    rounds.sort_by(|a, b| a.cpu_us_per_request.total_cmp(&b.cpu_us_per_request));
    rounds[rounds.len() / 2]
}

/// A declaration of `count` secrets, each read from its own file beside it (as a mounted
/// Kubernetes Secret is), one host each.
fn declaration(count: usize) -> String {
    let mut yaml = String::from("version: 1\nsecrets:\n");
    for i in 0..count {
        yaml.push_str(&format!(
            "  s{i:04}:\n    from: {{ file: s{i:04} }}\n    hosts: [\"h{i:04}.bench.test\"]\n    sinks: [egress]\n"
        ));
    }
    yaml
}

/// Reload and guard build times for each size, the median of `repeats`.
async fn reload_times(sizes: &[usize], repeats: usize) -> Result<Vec<Sized>, BenchError> {
    let tmp = tempfile::tempdir().map_err(BenchError::file(std::env::temp_dir()))?;
    let max = sizes.iter().copied().max().unwrap_or(0);
    for i in 0..max {
        let file = tmp.path().join(format!("s{i:04}"));
        std::fs::write(&file, stand_in_value("reloadvalue")).map_err(BenchError::file(&file))?;
    }
    let mut out = Vec::new();
    for &count in sizes {
        let path = tmp.path().join(format!("reload-{count}.yaml"));
        std::fs::write(&path, declaration(count)).map_err(BenchError::file(&path))?;
        let loaded = Policy::load(&path).map_err(|d| {
            BenchError::Declaration(
                d.0.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; "),
            )
        })?;
        let mut guard_ms = Vec::new();
        for _ in 0..repeats {
            let started = Instant::now();
            let guard = loaded
                .policy
                .build_guard(&loaded.policy.mint_placeholders())
                .map_err(|e| BenchError::peer("guard", e))?;
            guard_ms.push(started.elapsed().as_secs_f64() * 1e3);
            drop(guard);
        }
        let mut config = sluice_proxy::ProxyConfig::new(
            loaded.policy,
            SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            tmp.path().join(format!("audit-{count}.jsonl")),
        );
        config.policy_path = Some(path.clone());
        let proxy = sluice_proxy::start(config)
            .await
            .map_err(|e| BenchError::peer("sluice", e))?;
        let (mut reload_ms, mut rotated_ms) = (Vec::new(), Vec::new());
        for _ in 0..repeats {
            let started = Instant::now();
            proxy
                .reload()
                .await
                .map_err(|e| BenchError::peer("reload", e))?;
            reload_ms.push(started.elapsed().as_secs_f64() * 1e3);
            let file = tmp.path().join("s0000");
            std::fs::write(&file, stand_in_value("rotatedvalue"))
                .map_err(BenchError::file(&file))?;
            let started = Instant::now();
            proxy
                .reload()
                .await
                .map_err(|e| BenchError::peer("reload", e))?;
            rotated_ms.push(started.elapsed().as_secs_f64() * 1e3);
        }
        proxy
            .shutdown()
            .await
            .map_err(|e| BenchError::peer("sluice", e))?;
        out.push(Sized {
            secrets: count,
            reload_ms: median_of(&mut reload_ms),
            rotated_ms: median_of(&mut rotated_ms),
            guard_ms: median_of(&mut guard_ms),
        });
    }
    Ok(out)
}

fn median_of(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
