//! sluices side by side, for the benchmarks that tell what one setting costs (an egress
//! proxy in front, an `approve:` decision standing): each started from the bench's sluice
//! peer in a directory of its own with the measured token, each driven in turn, round after
//! round, with small GETs over HTTP/1.1 at 16 kept-alive connections, its CPU (and that of
//! a helper process beside it, Squid's) read from `/proc` over each round.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderValue;

use crate::child;
use crate::error::BenchError;
use crate::harness::{basic_auth, read_trimmed};
use crate::load::{self, ProxyAccess, Route};
use crate::pki::{ClientTls, Proto};

/// One sluice's figures for one round.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Gets {
    pub(crate) requests_per_s: f64,
    pub(crate) median_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) sluice_cpu_us: f64,
    /// The helper's CPU per request (none: 0).
    pub(crate) helper_cpu_us: f64,
    pub(crate) errors: u64,
}

/// One sluice and the route a client takes through it.
pub(crate) struct Peer {
    pub(crate) sluice: child::Spawned,
    pub(crate) route: Arc<Route>,
}

impl Peer {
    /// Starts the bench's sluice peer in `dir` (the upstream's CA copied in from `dir`'s
    /// parent) with the token `value`; `configure` adds this peer's arguments.
    pub(crate) async fn start(
        exe: &Path,
        dir: &Path,
        value: &str,
        upstream: &child::Spawned,
        configure: impl FnOnce(&mut tokio::process::Command),
    ) -> Result<Peer, BenchError> {
        std::fs::create_dir_all(dir).map_err(BenchError::file(dir))?;
        let upstream_ca = dir
            .parent()
            .map(|parent| parent.join("upstream-ca.pem"))
            .unwrap_or_default();
        std::fs::copy(&upstream_ca, dir.join("upstream-ca.pem"))
            .map_err(BenchError::file(&upstream_ca))?;
        let sluice = crate::sluice_peer::spawn(exe, dir, value, configure).await?;
        let read = |name: &str| read_trimmed(dir, name);
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
        Ok(Peer { sluice, route })
    }

    /// One phase of small GETs, with sluice's CPU over it and `helper`'s (a process id).
    pub(crate) async fn round(
        &self,
        helper: Option<u32>,
        phase: Duration,
    ) -> Result<Gets, BenchError> {
        let pid = self
            .sluice
            .pid()
            .ok_or_else(|| BenchError::peer("sluice", "no process id"))?;
        let ticks = child::clock_ticks_per_second() as f64;
        let cpu = |pid: Option<u32>| pid.and_then(child::cpu_ticks).unwrap_or(0) as f64 / ticks;
        let (sluice_before, helper_before) = (cpu(Some(pid)), cpu(helper));
        let tally = load::small(self.route.clone(), Proto::H1, 16, 1, phase).await;
        let (sluice_spent, helper_spent) =
            (cpu(Some(pid)) - sluice_before, cpu(helper) - helper_before);
        if tally.latencies_ns.is_empty() {
            return Err(BenchError::peer(
                "sluice",
                format!(
                    "no request answered: {}; sluice: {}",
                    tally.first_error.unwrap_or_default(),
                    self.sluice.stderr_tail()
                ),
            ));
        }
        let mut latencies = tally.latencies_ns.clone();
        latencies.sort_unstable();
        let requests = latencies.len() as f64;
        let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize] as f64 / 1e6;
        Ok(Gets {
            requests_per_s: requests / tally.elapsed.as_secs_f64().max(1e-9),
            median_ms: at(0.5),
            p99_ms: at(0.99),
            sluice_cpu_us: sluice_spent * 1e6 / requests,
            helper_cpu_us: helper_spent * 1e6 / requests,
            errors: tally.errors,
        })
    }
}

/// The median round, by requests/s.
pub(crate) fn median(rounds: &mut [Gets]) -> Gets {
    rounds.sort_by(|a, b| a.requests_per_s.total_cmp(&b.requests_per_s));
    rounds[rounds.len() / 2]
}
