//! Figures and the report: what each phase measured, the ratios to direct and to sluice,
//! the targets judged met or missed, rendered as Markdown (and as JSON for tools).
//!
//! Pure: no I/O, no clock. A peer that was not measured appears with its reason, never
//! dropped from a table.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::load::Tally;
use crate::pki::Proto;

mod cells;

pub(crate) use cells::{latency, mib, ratio};
use cells::{met, per, status_cell};

/// What a phase does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Small GETs on kept-alive connections.
    Small {
        /// HTTP/1.1 or HTTP/2.
        proto: Proto,
        /// Connections (tunnels) open.
        connections: usize,
        /// Concurrent requests per connection.
        streams: usize,
    },
    /// A fresh tunnel (CONNECT, TLS) per request.
    Tunnels {
        /// Concurrent workers.
        concurrency: usize,
    },
    /// One large download with redaction active.
    Large,
}

/// One measured phase.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Scenario {
    /// A short id (JSON key).
    pub(crate) id: &'static str,
    /// The table heading.
    pub(crate) title: &'static str,
    /// What it does.
    pub(crate) kind: Kind,
}

/// The phases, in the order they run against each peer.
pub(crate) const SCENARIOS: [Scenario; 6] = [
    Scenario {
        id: "h1-c1",
        title: "Small GETs, HTTP/1.1, 1 connection",
        kind: Kind::Small {
            proto: Proto::H1,
            connections: 1,
            streams: 1,
        },
    },
    Scenario {
        id: "h1-c16",
        title: "Small GETs, HTTP/1.1, 16 connections",
        kind: Kind::Small {
            proto: Proto::H1,
            connections: 16,
            streams: 1,
        },
    },
    Scenario {
        id: "h1-c64",
        title: "Small GETs, HTTP/1.1, 64 connections",
        kind: Kind::Small {
            proto: Proto::H1,
            connections: 64,
            streams: 1,
        },
    },
    Scenario {
        id: "h2-s64",
        title: "Small GETs, HTTP/2, 64 concurrent streams on 1 connection",
        kind: Kind::Small {
            proto: Proto::H2,
            connections: 1,
            streams: 64,
        },
    },
    Scenario {
        id: "tunnels-c16",
        title: "New tunnels: CONNECT + TLS + one GET + close, 16 concurrent",
        kind: Kind::Tunnels { concurrency: 16 },
    },
    Scenario {
        id: "large",
        title: "Large body: one download over HTTP/1.1 (sluice redacts it as it streams)",
        kind: Kind::Large,
    },
];

/// The most tunnels open at once in any phase (for the memory budget).
pub(crate) fn max_open_tunnels() -> usize {
    SCENARIOS
        .iter()
        .map(|s| match s.kind {
            Kind::Small { connections, .. } => connections,
            Kind::Tunnels { concurrency } => concurrency,
            Kind::Large => 1,
        })
        .max()
        .unwrap_or(1)
}

/// One phase's figures for one peer.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct Figures {
    /// Requests (or tunnels, or downloads) completed.
    pub(crate) completed: u64,
    /// Failures.
    pub(crate) errors: u64,
    /// The first failure.
    pub(crate) first_error: Option<String>,
    /// Seconds the phase lasted.
    pub(crate) elapsed_s: f64,
    /// Requests/s, tunnels/s, or MiB/s for the large body.
    pub(crate) rate: f64,
    /// Median latency, µs.
    pub(crate) p50_us: Option<f64>,
    /// 99th percentile latency, µs.
    pub(crate) p99_us: Option<f64>,
    /// Body bytes received.
    pub(crate) bytes: u64,
    /// Whether the phase's time bound cut it short.
    pub(crate) timed_out: bool,
    /// CPU seconds the proxy process used during the phase.
    pub(crate) proxy_cpu_s: Option<f64>,
    /// The most resident memory sampled during the phase, KiB.
    pub(crate) proxy_rss_max_kib: Option<u64>,
    /// TLS handshakes the upstream completed during the phase.
    pub(crate) upstream_handshakes: Option<u64>,
}

impl Figures {
    /// Turns a tally into rates and percentiles for `kind`.
    pub(crate) fn from_tally(kind: Kind, mut tally: Tally) -> Self {
        tally.latencies_ns.sort_unstable();
        let completed = tally.latencies_ns.len() as u64;
        let elapsed_s = tally.elapsed.as_secs_f64();
        let rate = if elapsed_s <= 0.0 {
            0.0
        } else if kind == Kind::Large {
            tally.bytes as f64 / (1024.0 * 1024.0) / elapsed_s
        } else {
            completed as f64 / elapsed_s
        };
        let micros = |ns: u64| ns as f64 / 1000.0;
        Self {
            completed,
            errors: tally.errors,
            first_error: tally.first_error,
            elapsed_s,
            rate,
            p50_us: percentile(&tally.latencies_ns, 0.50).map(micros),
            p99_us: percentile(&tally.latencies_ns, 0.99).map(micros),
            bytes: tally.bytes,
            timed_out: tally.timed_out,
            proxy_cpu_s: None,
            proxy_rss_max_kib: None,
            upstream_handshakes: None,
        }
    }

    /// Counts a failure found after the phase (a wrong byte count, say).
    pub(crate) fn fail(&mut self, why: String) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(why);
        }
    }
}

/// The nearest-rank percentile of sorted values.
pub(crate) fn percentile(sorted: &[u64], q: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// Whether a peer was measured.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "state", content = "reason", rename_all = "lowercase")]
pub(crate) enum Status {
    /// Measured.
    Measured,
    /// Not installed or not built; the reason says why.
    Missing(String),
    /// Started (or tried to) but failed; the reason says how.
    Failed(String),
}

/// A proxy's memory over the run, KiB.
#[derive(Clone, Copy, Debug, Serialize)]
pub(crate) struct MemoryFigures {
    /// Resident after start and one request.
    pub(crate) idle_kib: u64,
    /// Peak resident over every phase (`VmHWM`).
    pub(crate) peak_kib: u64,
}

/// One peer's results.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct PeerReport {
    /// Its short name (`direct`, `sluice`, ...).
    pub(crate) name: String,
    /// What it is, as built or installed.
    pub(crate) about: String,
    /// Whether it was measured.
    pub(crate) status: Status,
    /// Figures per phase id.
    pub(crate) phases: BTreeMap<String, Figures>,
    /// Its memory (proxies only).
    pub(crate) memory: Option<MemoryFigures>,
}

impl PeerReport {
    fn figures(&self, id: &str) -> Option<&Figures> {
        match self.status {
            Status::Measured => self.phases.get(id).filter(|f| f.completed > 0),
            _ => None,
        }
    }
}

/// Where and how the run was made.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct Machine {
    /// Cores the harness sees.
    pub(crate) cores: usize,
    /// `/proc/cpuinfo`'s model name.
    pub(crate) model: String,
    /// The kernel release.
    pub(crate) kernel: String,
    /// `/proc/loadavg` (1, 5, 15 min) when the run started.
    pub(crate) load_start: String,
    /// `/proc/loadavg` when it ended.
    pub(crate) load_end: String,
    /// When it ran (UTC).
    pub(crate) date: String,
    /// Diagnostic settings in force (`SLUICE_BENCH_WRAP`, `SLUICE_BENCH_WORKERS`): figures
    /// made with any are not comparable with a plain run's.
    pub(crate) diagnostics: Vec<String>,
}

/// The parameters of a run.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct PlanFigures {
    /// Smoke mode.
    pub(crate) smoke: bool,
    /// Seconds per measured phase.
    pub(crate) phase_s: f64,
    /// The large body, MiB.
    pub(crate) large_mib: u64,
    /// The bound on the large download, s.
    pub(crate) large_limit_s: f64,
    /// The ids of the phases run.
    pub(crate) phases: Vec<String>,
    /// Rounds run; each figure is the median over them.
    pub(crate) rounds: usize,
}

/// A whole run.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct Report {
    /// The machine.
    pub(crate) machine: Machine,
    /// The parameters.
    pub(crate) plan: PlanFigures,
    /// Every peer, in the order measured.
    pub(crate) peers: Vec<PeerReport>,
}

/// One of the targets, judged.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Verdict {
    /// The target, in words.
    pub(crate) target: String,
    /// What was measured.
    pub(crate) measured: String,
    /// `met`, `missed`, or why it could not be judged.
    pub(crate) state: String,
}

impl Report {
    /// One report from several rounds of the same plan: for every peer and phase, the
    /// figures of the round with the median rate (the lower median for an even count), so
    /// that a figure is always one that was measured; a peer's peak memory is the highest
    /// of the rounds. A peer not measured in some round keeps that round's status.
    ///
    /// Why: on a small shared machine one 3-second phase can swing by a quarter between
    /// runs; the median of interleaved rounds is what a ratio should be read from.
    pub(crate) fn median_of(rounds: Vec<Report>) -> Option<Report> {
        let count = rounds.len();
        let first = rounds.first()?;
        let mut merged = Report {
            machine: first.machine.clone(),
            plan: first.plan.clone(),
            peers: Vec::new(),
        };
        merged.plan.rounds = count;
        if let Some(last) = rounds.last() {
            merged.machine.load_end.clone_from(&last.machine.load_end);
        }
        for peer in &first.peers {
            let all: Vec<&PeerReport> = rounds.iter().filter_map(|r| r.peer(&peer.name)).collect();
            let mut out = peer.clone();
            if let Some(bad) = all.iter().find(|p| !matches!(p.status, Status::Measured)) {
                out.status = bad.status.clone();
            }
            for (id, figures) in &mut out.phases {
                let mut measured: Vec<&Figures> =
                    all.iter().filter_map(|p| p.phases.get(id)).collect();
                measured.sort_by(|a, b| a.rate.total_cmp(&b.rate));
                if let Some(median) = measured.get((measured.len().saturating_sub(1)) / 2) {
                    *figures = (*median).clone();
                }
            }
            out.memory = all
                .iter()
                .filter_map(|p| p.memory)
                .max_by_key(|m| m.peak_kib);
            merged.peers.push(out);
        }
        Some(merged)
    }

    fn peer(&self, name: &str) -> Option<&PeerReport> {
        self.peers.iter().find(|p| p.name == name)
    }

    fn rate(&self, peer: &str, id: &str) -> Option<f64> {
        self.peer(peer)?.figures(id).map(|f| f.rate)
    }

    /// Why `peer` has no figure for `id` (for a verdict that cannot be judged).
    fn absent(&self, peer: &str) -> String {
        match self.peer(peer).map(|p| &p.status) {
            None => format!("{peer} not in this run"),
            Some(Status::Missing(why)) => format!("{peer} MISSING: {why}"),
            Some(Status::Failed(why)) => format!("{peer} FAILED: {why}"),
            Some(Status::Measured) => format!("{peer} completed nothing in this phase"),
        }
    }

    /// The targets, judged on this run.
    pub(crate) fn verdicts(&self) -> Vec<Verdict> {
        let mut out = Vec::new();
        let ratio_target =
            |out: &mut Vec<Verdict>, target: &str, id: &str, peer: &str, min: f64| {
                let (state, measured) = match (self.rate("sluice", id), self.rate(peer, id)) {
                    (Some(s), Some(p)) if p > 0.0 => {
                        let r = s / p;
                        (met(r >= min), format!("{r:.2}× {peer}"))
                    }
                    (None, _) => (self.absent("sluice"), "—".to_owned()),
                    _ => (self.absent(peer), "—".to_owned()),
                };
                out.push(Verdict {
                    target: target.to_owned(),
                    measured,
                    state,
                });
            };
        ratio_target(
            &mut out,
            "small GETs, 16 connections: sluice ≥ 1.3× hudsucker",
            "h1-c16",
            "hudsucker",
            1.3,
        );
        ratio_target(
            &mut out,
            "small GETs, 16 connections: sluice ≥ 40× mitmproxy",
            "h1-c16",
            "mitmproxy",
            40.0,
        );
        ratio_target(
            &mut out,
            "small GETs, 16 connections: sluice ≥ 0.5× direct",
            "h1-c16",
            "direct",
            0.5,
        );
        let median = |peer: &str| {
            self.peer(peer)
                .and_then(|p| p.figures("h1-c1"))
                .and_then(|f| f.p50_us)
        };
        let (state, measured) = match (median("sluice"), median("direct")) {
            (Some(s), Some(d)) => (met(s - d <= 60.0), format!("+{:.0} µs", s - d)),
            (None, _) => (self.absent("sluice"), "—".to_owned()),
            _ => (self.absent("direct"), "—".to_owned()),
        };
        out.push(Verdict {
            target: "small GETs, 1 connection: sluice adds ≤ 60 µs to direct's median".to_owned(),
            measured,
            state,
        });
        ratio_target(
            &mut out,
            "large body with redaction: sluice ≥ 0.45× direct",
            "large",
            "direct",
            0.45,
        );
        ratio_target(
            &mut out,
            "new tunnels: sluice ≥ 1.2× hudsucker",
            "tunnels-c16",
            "hudsucker",
            1.2,
        );
        let tunnels = max_open_tunnels() as u64;
        let budget_kib = 64 * 1024 + 64 * tunnels;
        let (state, measured) = match self.peer("sluice").and_then(|p| p.memory) {
            Some(m) => (
                met(m.peak_kib <= budget_kib),
                format!("peak {}", mib(m.peak_kib)),
            ),
            None => (self.absent("sluice"), "—".to_owned()),
        };
        out.push(Verdict {
            target: format!(
                "memory flat under load: sluice's peak RSS ≤ 64 MiB + 64 KiB × {tunnels} open tunnels = {}",
                mib(budget_kib)
            ),
            measured,
            state,
        });
        out
    }

    /// The report as Markdown.
    pub(crate) fn markdown(&self) -> String {
        let mut md = String::new();
        let m = &self.machine;
        let _ = writeln!(
            md,
            "Measured {} on {} cores ({}), Linux {}; load average {} at the start, {} at the end.",
            m.date, m.cores, m.model, m.kernel, m.load_start, m.load_end
        );
        if !m.diagnostics.is_empty() {
            let _ = writeln!(
                md,
                "**Diagnostic settings in force: {}.** These figures are not comparable with a plain run's.",
                m.diagnostics.join(", ")
            );
        }
        let p = &self.plan;
        let _ = writeln!(
            md,
            "{}{:.2} s per phase{}; large body {} MiB, bounded to {:.0} s. Client, upstream and proxy share the cores.\n",
            if p.smoke {
                "SMOKE RUN (not a measurement): "
            } else {
                ""
            },
            p.phase_s,
            if p.rounds > 1 {
                format!(
                    "; {} rounds, every peer in each, and each figure is the median over them (ratios are of medians)",
                    p.rounds
                )
            } else {
                String::new()
            },
            p.large_mib,
            p.large_limit_s
        );
        for scenario in SCENARIOS
            .iter()
            .filter(|s| p.phases.iter().any(|id| id == s.id))
        {
            self.scenario_table(&mut md, scenario);
        }
        self.memory_table(&mut md);
        let _ = writeln!(md, "### Targets\n");
        let _ = writeln!(md, "| target | measured | verdict |\n|---|---|---|");
        for v in self.verdicts() {
            let _ = writeln!(md, "| {} | {} | {} |", v.target, v.measured, v.state);
        }
        md
    }

    fn scenario_table(&self, md: &mut String, scenario: &Scenario) {
        let (unit, extra) = match scenario.kind {
            Kind::Small { .. } => ("req/s", "proxy CPU / req"),
            Kind::Tunnels { .. } => (
                "tunnels/s",
                "proxy CPU / tunnel (upstream TLS handshakes / tunnel)",
            ),
            Kind::Large => ("MiB/s", "proxy CPU / MiB"),
        };
        let _ = writeln!(md, "### {}\n", scenario.title);
        let _ = writeln!(
            md,
            "| peer | {unit} | p50 | p99 | × direct | × sluice | {extra} | errors |\n|---|---:|---:|---:|---:|---:|---:|---:|"
        );
        let direct = self.rate("direct", scenario.id);
        let sluice = self.rate("sluice", scenario.id);
        for peer in &self.peers {
            let Some(f) = peer
                .phases
                .get(scenario.id)
                .filter(|_| matches!(peer.status, Status::Measured))
            else {
                let _ = writeln!(
                    md,
                    "| {} | {} | | | | | | |",
                    peer.name,
                    status_cell(&peer.status)
                );
                continue;
            };
            let rate = if f.completed == 0 && f.bytes == 0 {
                "—".to_owned()
            } else if scenario.kind == Kind::Large {
                format!(
                    "{:.0}{}",
                    f.rate,
                    if f.timed_out { " (cut at bound)" } else { "" }
                )
            } else {
                format!("{:.0}", f.rate)
            };
            let extra = match scenario.kind {
                Kind::Small { .. } => per(f.proxy_cpu_s.map(|s| s * 1e6), f.completed as f64, "µs"),
                Kind::Tunnels { .. } => {
                    let cpu = per(f.proxy_cpu_s.map(|s| s * 1e6), f.completed as f64, "µs");
                    match f.upstream_handshakes {
                        Some(h) if f.completed > 0 => {
                            format!("{cpu} ({:.2})", h as f64 / f.completed as f64)
                        }
                        _ => cpu,
                    }
                }
                Kind::Large => per(
                    f.proxy_cpu_s.map(|s| s * 1e3),
                    f.bytes as f64 / (1024.0 * 1024.0),
                    "ms",
                ),
            };
            let errors = match &f.first_error {
                Some(first) if f.errors > 0 => {
                    format!("{} ({})", f.errors, first.replace('|', "/"))
                }
                _ => f.errors.to_string(),
            };
            let usable = f.completed > 0 || f.bytes > 0;
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                peer.name,
                rate,
                latency(f.p50_us),
                latency(f.p99_us),
                ratio(usable.then_some(f.rate), direct),
                ratio(usable.then_some(f.rate), sluice),
                extra,
                errors
            );
        }
        md.push('\n');
    }

    fn memory_table(&self, md: &mut String) {
        let _ = writeln!(md, "### Proxy memory (resident set)\n");
        let _ = writeln!(
            md,
            "| peer | after start | peak over the run (VmHWM) | × sluice |\n|---|---:|---:|---:|"
        );
        let sluice = self
            .peer("sluice")
            .and_then(|p| p.memory)
            .map(|m| m.peak_kib as f64);
        for peer in &self.peers {
            match (&peer.status, peer.memory) {
                (Status::Measured, Some(m)) => {
                    let _ = writeln!(
                        md,
                        "| {} | {} | {} | {} |",
                        peer.name,
                        mib(m.idle_kib),
                        mib(m.peak_kib),
                        ratio(Some(m.peak_kib as f64), sluice)
                    );
                }
                (Status::Measured, None) => {
                    let _ = writeln!(md, "| {} | no proxy process | | |", peer.name);
                }
                (status, _) => {
                    let _ = writeln!(md, "| {} | {} | | |", peer.name, status_cell(status));
                }
            }
        }
        md.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let values: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&values, 0.50), Some(50));
        assert_eq!(percentile(&values, 0.99), Some(99));
        assert_eq!(percentile(&values, 1.0), Some(100));
        assert_eq!(percentile(&[7], 0.99), Some(7));
        assert_eq!(percentile(&[], 0.5), None);
    }

    #[test]
    fn ratios_and_units_read_well() {
        assert_eq!(ratio(Some(1.0), Some(2.0)), "0.50×");
        assert_eq!(ratio(Some(450.0), Some(10.0)), "45×");
        assert_eq!(ratio(Some(1.0), Some(200.0)), "0.005×");
        assert_eq!(ratio(Some(1.0), None), "—");
        assert_eq!(ratio(Some(1.0), Some(0.0)), "—");
        assert_eq!(latency(Some(412.4)), "412 µs");
        assert_eq!(latency(Some(12_345.0)), "12.3 ms");
        assert_eq!(mib(68 * 1024), "68.0 MiB");
    }

    #[test]
    fn figures_turn_a_tally_into_rates() {
        let tally = Tally {
            latencies_ns: vec![3_000, 1_000, 2_000, 4_000],
            elapsed: Duration::from_secs(2),
            bytes: 4 << 20,
            ..Tally::default()
        };
        let small = Figures::from_tally(SCENARIOS[0].kind, tally);
        assert_eq!(small.completed, 4);
        assert_eq!(small.rate, 2.0);
        assert_eq!(small.p50_us, Some(2.0));
        let large = Figures::from_tally(
            Kind::Large,
            Tally {
                latencies_ns: vec![1],
                elapsed: Duration::from_secs(2),
                bytes: 4 << 20,
                ..Tally::default()
            },
        );
        assert_eq!(large.rate, 2.0, "MiB/s");
    }

    fn peer(name: &str, status: Status, rates: &[(&str, f64)]) -> PeerReport {
        PeerReport {
            name: name.to_owned(),
            about: String::new(),
            status,
            phases: rates
                .iter()
                .map(|(id, rate)| {
                    (
                        (*id).to_owned(),
                        Figures {
                            completed: 10,
                            rate: *rate,
                            p50_us: Some(*rate),
                            ..Figures::default()
                        },
                    )
                })
                .collect(),
            memory: None,
        }
    }

    #[test]
    fn rounds_merge_into_the_median_round_per_peer_and_phase() {
        let round = |sluice: f64, hudsucker: Status, peak_kib: u64| {
            let mut sluice = peer("sluice", Status::Measured, &[("h1-c16", sluice)]);
            sluice.memory = Some(MemoryFigures {
                idle_kib: 1,
                peak_kib,
            });
            Report {
                plan: PlanFigures {
                    phases: vec!["h1-c16".to_owned()],
                    rounds: 1,
                    ..PlanFigures::default()
                },
                peers: vec![sluice, peer("hudsucker", hudsucker, &[("h1-c16", 5.0)])],
                ..Report::default()
            }
        };
        let merged = Report::median_of(vec![
            round(10.0, Status::Measured, 300),
            round(30.0, Status::Failed("crashed".to_owned()), 100),
            round(20.0, Status::Measured, 200),
        ])
        .expect("three rounds");
        assert_eq!(merged.plan.rounds, 3);
        assert_eq!(merged.rate("sluice", "h1-c16"), Some(20.0));
        assert_eq!(
            merged
                .peer("sluice")
                .and_then(|p| p.memory)
                .map(|m| m.peak_kib),
            Some(300)
        );
        // A peer that failed in any round is reported failed, not quietly measured.
        assert!(matches!(
            merged.peer("hudsucker").map(|p| &p.status),
            Some(Status::Failed(_))
        ));
        assert!(merged.markdown().contains("3 rounds"));
        // Two rounds: the lower of the two, a figure that was measured.
        let two = Report::median_of(vec![
            round(10.0, Status::Measured, 1),
            round(30.0, Status::Measured, 1),
        ])
        .expect("two rounds");
        assert_eq!(two.rate("sluice", "h1-c16"), Some(10.0));
        assert!(Report::median_of(Vec::new()).is_none());
    }

    #[test]
    fn targets_are_judged_and_missing_peers_are_named() {
        let report = Report {
            plan: PlanFigures {
                phases: SCENARIOS.iter().map(|s| s.id.to_owned()).collect(),
                ..PlanFigures::default()
            },
            peers: vec![
                peer(
                    "direct",
                    Status::Measured,
                    &[("h1-c16", 1000.0), ("h1-c1", 100.0)],
                ),
                peer(
                    "sluice",
                    Status::Measured,
                    &[("h1-c16", 600.0), ("h1-c1", 200.0)],
                ),
                peer("hudsucker", Status::Measured, &[("h1-c16", 500.0)]),
                peer("mitmproxy", Status::Missing("no python".to_owned()), &[]),
            ],
            ..Report::default()
        };
        let verdicts = report.verdicts();
        let find = |text: &str| {
            verdicts
                .iter()
                .find(|v| v.target.contains(text))
                .unwrap_or_else(|| panic!("no verdict for {text}"))
        };
        assert_eq!(find("1.3× hudsucker").state, "**missed**");
        assert_eq!(find("1.3× hudsucker").measured, "1.20× hudsucker");
        assert_eq!(find("0.5× direct").state, "met");
        assert_eq!(find("40× mitmproxy").state, "mitmproxy MISSING: no python");
        assert_eq!(find("60 µs").state, "**missed**");
        assert_eq!(find("60 µs").measured, "+100 µs");
        let md = report.markdown();
        assert!(md.contains("| mitmproxy | MISSING: no python |"), "{md}");
        assert!(md.contains("| sluice | 600 |"), "{md}");
    }
}
