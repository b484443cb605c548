//! `sluice-bench minted`: what a minted credential (`oauth2:`) costs, against a baseline
//! measured in the same run, through one sluice per phase.
//!
//! - **A cached minted token against a plain swap**: small GETs over HTTP/1.1 at 16
//!   kept-alive connections, alternately carrying a plain secret's placeholder and a minted
//!   secret's (its token minted once, before the clock starts, and fresh for the whole
//!   phase). sluice's CPU per request (from its process's CPU time), the median round's.
//!   Both secrets are granted toward the same host, so both pay the step that checks a
//!   minted token is fit to send; the difference is the minted swap's own.
//! - **64 connections across an expiry**: a second sluice whose tokens live 2 s; 64
//!   connections send small GETs carrying the minted placeholder for 2.5 s, across the token's
//!   refresh window and its expiry (the first mint is made by one request before the
//!   clock starts). The token endpoint counts its token requests. What requests waited on a token request
//!   is sluice's own histogram (`sluice_mint_wait_seconds`, scraped from its admin endpoint
//!   before and after the phase), set against one token round trip (a direct request to the
//!   endpoint, the median of 20). The slowest request end to end is reported beside it: on
//!   two cores at 64 connections it is scheduling, not a wait for a token.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Args;
use http::HeaderValue;

use crate::admin::Admin;
use crate::child;
use crate::error::BenchError;
use crate::harness::{basic_auth, stand_in_value};
use crate::load::{self, ProxyAccess, Route};
use crate::pki::{ClientTls, Proto, UPSTREAM_HOST};
use crate::upstream::{TOKEN_LIFETIME_VAR, TOKEN_VAR};

/// The minted secret's name, and the variable its client secret is read from.
const MINTED: &str = "minted_bench";
const CLIENT_SECRET_VAR: &str = "SLUICE_BENCH_CLIENT_SECRET";

/// The target: a cached minted token's swap costs at most this much more CPU per request.
const TARGET_US: f64 = 2.0;

/// What `sluice-bench minted` takes.
#[derive(Debug, Args)]
pub(crate) struct MintedArgs {
    /// Rounds of the per-request phase; the median round is reported.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Seconds per phase.
    #[arg(long, default_value_t = 3.0)]
    phase_secs: f64,
    /// A quick check that the benchmark works (short phases); the targets are not judged.
    #[arg(long)]
    smoke: bool,
}

#[derive(Debug, Clone, Copy, Default)]
struct Gets {
    requests_per_s: f64,
    cpu_us_per_request: f64,
    errors: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Expiry {
    requests: usize,
    errors: u64,
    /// Token requests during the phase (the first mint, before it, not counted).
    token_requests: u64,
    median_ms: f64,
    slowest_ms: f64,
    /// One token round trip, straight to the endpoint.
    token_rtt_ms: f64,
    /// Requests that waited on a token request during the phase, and the upper bound of
    /// the histogram bucket holding the longest wait (None when none waited).
    waits: u64,
    longest_wait_ms: Option<f64>,
}

impl Expiry {
    /// No request waited longer than one token round trip (a wait's bucket bound is at
    /// least the wait, so a bound within one round trip is a wait within it).
    fn waited_within_a_round_trip(&self) -> bool {
        self.longest_wait_ms
            .is_none_or(|longest| longest <= self.token_rtt_ms)
    }
}

/// Requests that waited on a token request, from a `/metrics` page: the count, and each
/// bucket's `(upper bound ms, cumulative count)`.
fn mint_waits(page: &str) -> (u64, Vec<(f64, u64)>) {
    let mut count = 0;
    let mut buckets = Vec::new();
    for line in page.lines() {
        if let Some(n) = line.strip_prefix("sluice_mint_wait_seconds_count ") {
            count = n.trim().parse().unwrap_or(0);
        } else if let Some(rest) = line.strip_prefix("sluice_mint_wait_seconds_bucket{le=\"")
            && let Some((bound, n)) = rest.split_once("\"} ")
        {
            let bound = bound.parse::<f64>().unwrap_or(f64::INFINITY) * 1e3;
            buckets.push((bound, n.trim().parse().unwrap_or(0)));
        }
    }
    (count, buckets)
}

/// The waits between two pages: how many, and the bound of the bucket holding the longest.
fn waits_between(before: &str, after: &str) -> (u64, Option<f64>) {
    let (count_before, buckets_before) = mint_waits(before);
    let (count_after, buckets_after) = mint_waits(after);
    let waits = count_after.saturating_sub(count_before);
    let longest = buckets_after
        .iter()
        .zip(
            buckets_before
                .iter()
                .map(|(_, n)| *n)
                .chain(std::iter::repeat(0)),
        )
        .find(|((_, after), before)| after.saturating_sub(*before) == waits)
        .map(|((bound, _), _)| *bound);
    (waits, if waits == 0 { None } else { longest })
}

/// The declaration: the measured one (the bench token swapped in `Authorization`), and a
/// minted secret with the client-credentials grant at the upstream's `/token`, granted
/// toward the same upstream.
fn declaration(port: u16) -> String {
    let minted = format!(
        "  {MINTED}:\n    \
             oauth2:\n      \
               token_url: https://{UPSTREAM_HOST}:{port}/token\n      \
               grant: client_credentials\n      \
               client_id: bench-client\n      \
               client_secret: {{ env: {CLIENT_SECRET_VAR} }}\n    \
             hosts: [\"{UPSTREAM_HOST}\"]\n    \
             sinks: [egress]\n    \
             header: [Authorization]\n"
    );
    crate::sluice_peer::declaration().replacen("egress:\n", &format!("{minted}egress:\n"), 1)
}

/// Runs the benchmark and prints the report; exit 2 when a target is missed.
pub(crate) fn run(args: &MintedArgs) -> Result<ExitCode, BenchError> {
    let runtime = crate::harness::client_runtime()?;
    let (rounds, phase) = if args.smoke {
        (1, Duration::from_millis(300))
    } else {
        (args.rounds.max(1), Duration::from_secs_f64(args.phase_secs))
    };
    let (plain, minted) = runtime.block_on(per_request(rounds, phase))?;
    // 2.5 s from a token's mint: through its refresh window (from 1.5 s) and its expiry
    // (2 s), and over before the next token's window opens (3 s after the first).
    let expiry = runtime.block_on(across_expiry(Duration::from_millis(2500)))?;
    println!("{}", render(plain, minted, expiry));
    let met = minted.cpu_us_per_request - plain.cpu_us_per_request <= TARGET_US
        && expiry.token_requests == 1
        && expiry.errors == 0
        && expiry.waited_within_a_round_trip();
    Ok(if met || args.smoke {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    })
}

fn render(plain: Gets, minted: Gets, expiry: Expiry) -> String {
    let more = minted.cpu_us_per_request - plain.cpu_us_per_request;
    let judge = |ok: bool| if ok { "met" } else { "MISSED" };
    let longest = expiry
        .longest_wait_ms
        .map_or_else(|| "none waited".to_owned(), |ms| format!("≤ {ms:.1} ms"));
    format!(
        "| GET /small, HTTP/1.1, 16 connections | requests/s | sluice CPU µs/request | errors |\n\
         |---|---:|---:|---:|\n\
         | plain swap | {:.0} | {:.1} | {} |\n\
         | minted token, cached | {:.0} | {:.1} | {} |\n\
         \n\
         | 64 connections across an expiry (tokens live 2 s) | |\n\
         |---|---:|\n\
         | requests (errors) | {} ({}) |\n\
         | token requests during the phase | {} |\n\
         | median latency | {:.2} ms |\n\
         | slowest request, end to end | {:.2} ms |\n\
         | one token round trip | {:.2} ms |\n\
         | requests that waited on a token request | {} |\n\
         \n\
         | target | measured | |\n\
         |---|---:|---|\n\
         | minted swap ≤ {TARGET_US} µs more CPU per request | {more:+.2} µs | {} |\n\
         | one token request across the expiry | {} | {} |\n\
         | no request waits longer than one token round trip | {longest} | {} |",
        plain.requests_per_s,
        plain.cpu_us_per_request,
        plain.errors,
        minted.requests_per_s,
        minted.cpu_us_per_request,
        minted.errors,
        expiry.requests,
        expiry.errors,
        expiry.token_requests,
        expiry.median_ms,
        expiry.slowest_ms,
        expiry.token_rtt_ms,
        expiry.waits,
        judge(more <= TARGET_US),
        expiry.token_requests,
        judge(expiry.token_requests == 1 && expiry.errors == 0),
        judge(expiry.waited_within_a_round_trip()),
    )
}

/// One sluice and its upstream, with tokens living `lifetime_s`.
struct Setup {
    _tmp: tempfile::TempDir,
    upstream: child::Spawned,
    sluice: child::Spawned,
    plain: Arc<Route>,
    minted: Arc<Route>,
    /// The endpoint, straight (no proxy), for its round trip and its counter.
    direct: Arc<Route>,
    admin: Admin,
}

async fn setup(lifetime_s: u64) -> Result<Setup, BenchError> {
    let tmp = tempfile::tempdir().map_err(BenchError::file(std::env::temp_dir()))?;
    let dir = tmp.path().to_owned();
    let exe = std::env::current_exe().map_err(BenchError::file("current executable"))?;
    let value = stand_in_value("benchvalue");
    let upstream = {
        let mut command = tokio::process::Command::new(&exe);
        command
            .arg("upstream")
            .arg("--dir")
            .arg(&dir)
            .arg("--large-bytes")
            .arg("1048576")
            .env(TOKEN_VAR, &value)
            .env(TOKEN_LIFETIME_VAR, lifetime_s.to_string());
        child::Spawned::start(
            "upstream",
            command,
            &dir.join("upstream.stderr"),
            child::Ready::Line,
        )
        .await?
    };
    let policy = dir.join("minted.yaml");
    std::fs::write(&policy, declaration(upstream.addr().port()))
        .map_err(BenchError::file(&policy))?;
    let sluice = crate::sluice_peer::spawn(&exe, &dir, &value, |sluice| {
        sluice
            .arg("--policy")
            .arg(&policy)
            .arg("--admin")
            .env(CLIENT_SECRET_VAR, "bench-client-secret-0001");
    })
    .await?;
    let read = |name: &str| crate::harness::read_trimmed(&dir, name);
    let placeholders = read("placeholders")?;
    let minted_placeholder = placeholders
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{MINTED}=")))
        .map(str::to_owned)
        .ok_or_else(|| BenchError::peer("sluice", "no placeholder for the minted secret"))?;
    let tls = ClientTls::trusting(&dir.join("ca.pem"))?;
    let route = |authorization: &str| -> Result<Arc<Route>, BenchError> {
        Ok(Arc::new(Route {
            proxy: Some(ProxyAccess {
                addr: sluice.addr(),
                authorization: read("proxy-url").ok().map(|url| basic_auth(&url)),
            }),
            tls: tls.clone(),
            upstream: upstream.addr(),
            authorization: HeaderValue::from_str(&format!("Bearer {authorization}"))
                .map_err(|e| BenchError::peer("sluice", e))?,
            headers: Vec::new(),
        }))
    };
    let admin = Admin::from_url(&read("admin-url")?)?;
    let plain = route(&read("placeholder")?)?;
    let minted = route(&minted_placeholder)?;
    let direct = Arc::new(Route {
        proxy: None,
        tls: ClientTls::trusting(&dir.join("upstream-ca.pem"))?,
        upstream: upstream.addr(),
        authorization: HeaderValue::from_static("-"),
        headers: Vec::new(),
    });
    Ok(Setup {
        _tmp: tmp,
        upstream,
        sluice,
        plain,
        minted,
        direct,
        admin,
    })
}

impl Setup {
    async fn stop(self) {
        self.sluice.stop(Duration::from_secs(3)).await;
        self.upstream.stop(Duration::from_secs(3)).await;
    }

    /// Tokens the endpoint has minted so far.
    async fn tokens(&self) -> Result<u64, BenchError> {
        let mut sender = self.direct.open(Proto::H1).await?;
        let answer = sender.get(&self.direct, "/stats", true).await?;
        let text = String::from_utf8_lossy(&answer.body).into_owned();
        text.lines()
            .find_map(|l| l.strip_prefix("tokens "))
            .and_then(|n| n.trim().parse().ok())
            .ok_or_else(|| BenchError::peer("upstream", format!("no token count in {text:?}")))
    }
}

async fn per_request(rounds: usize, phase: Duration) -> Result<(Gets, Gets), BenchError> {
    let setup = setup(3600).await?;
    let pid = setup
        .sluice
        .pid()
        .ok_or_else(|| BenchError::peer("sluice", "no process id"))?;
    let ticks_per_second = child::clock_ticks_per_second() as f64;
    let cpu = || child::cpu_ticks(pid).unwrap_or(0) as f64 / ticks_per_second;
    let (mut plains, mut minteds) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        for (route, figures) in [(&setup.plain, &mut plains), (&setup.minted, &mut minteds)] {
            let before = cpu();
            let tally = load::small(route.clone(), Proto::H1, 16, 1, phase).await;
            let spent = cpu() - before;
            if tally.latencies_ns.is_empty() {
                return Err(BenchError::peer(
                    "sluice",
                    format!(
                        "no request answered: {}; sluice: {}",
                        tally.first_error.unwrap_or_default(),
                        setup.sluice.stderr_tail()
                    ),
                ));
            }
            let requests = tally.latencies_ns.len() as f64;
            figures.push(Gets {
                requests_per_s: requests / tally.elapsed.as_secs_f64().max(1e-9),
                cpu_us_per_request: spent * 1e6 / requests,
                errors: tally.errors,
            });
        }
    }
    setup.stop().await;
    Ok((median(&mut plains), median(&mut minteds)))
}

fn median(rounds: &mut [Gets]) -> Gets {
    rounds.sort_by(|a, b| a.cpu_us_per_request.total_cmp(&b.cpu_us_per_request));
    rounds[rounds.len() / 2]
}

async fn across_expiry(phase: Duration) -> Result<Expiry, BenchError> {
    let setup = setup(2).await?;
    // One token round trip, straight to the endpoint.
    let mut sender = setup.direct.open(Proto::H1).await?;
    let mut trips = Vec::with_capacity(20);
    for _ in 0..20 {
        let started = Instant::now();
        sender.get(&setup.direct, "/token", true).await?;
        trips.push(started.elapsed().as_secs_f64() * 1e3);
    }
    trips.sort_by(f64::total_cmp);
    let token_rtt_ms = trips[trips.len() / 2];
    // The first mint, before the clock starts: one request that waits for it. The phase
    // then starts with a fresh token and runs through its refresh window and its expiry.
    let mut first = setup.minted.open(Proto::H1).await?;
    first.get(&setup.minted, "/small", true).await?;
    drop(first);
    let before = setup.tokens().await?;
    let page_before = setup.admin.scrape().await?;
    let tally = load::small(setup.minted.clone(), Proto::H1, 64, 1, phase).await;
    let page_after = setup.admin.scrape().await?;
    let after = setup.tokens().await?;
    let (waits, longest_wait_ms) = waits_between(&page_before, &page_after);
    let mut latencies = tally.latencies_ns.clone();
    latencies.sort_unstable();
    let ms = |ns: u64| ns as f64 / 1e6;
    let expiry = Expiry {
        requests: latencies.len(),
        errors: tally.errors,
        token_requests: after.saturating_sub(before),
        median_ms: latencies.get(latencies.len() / 2).copied().map_or(0.0, ms),
        slowest_ms: latencies.last().copied().map_or(0.0, ms),
        token_rtt_ms,
        waits,
        longest_wait_ms,
    };
    setup.stop().await;
    Ok(expiry)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(count: u64, buckets: &[(&str, u64)]) -> String {
        let mut page = String::from("# HELP sluice_mint_wait_seconds x\n");
        for (le, n) in buckets {
            page.push_str(&format!(
                "sluice_mint_wait_seconds_bucket{{le=\"{le}\"}} {n}\n"
            ));
        }
        page.push_str(&format!("sluice_mint_wait_seconds_count {count}\n"));
        page
    }

    #[test]
    fn the_longest_wait_is_the_first_bucket_holding_every_new_wait() {
        let before = page(1, &[("0.001", 0), ("0.005", 1), ("0.01", 1), ("+Inf", 1)]);
        let none = waits_between(&before, &before);
        assert_eq!(none, (0, None));
        let after = page(3, &[("0.001", 1), ("0.005", 2), ("0.01", 3), ("+Inf", 3)]);
        let (waits, longest) = waits_between(&before, &after);
        assert_eq!(waits, 2);
        assert_eq!(longest, Some(10.0));
    }
}
