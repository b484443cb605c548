//! The reviewers' report behind `sluice audit report`: every log's verdict, its runs, and
//! aggregates of what they hold (flows from secrets to hosts, refusals by reason with the
//! grant that would allow each, denied hosts, failed logins, withheld variables, reloads,
//! a timeline), as JSON or as one self-contained HTML page ([`Report::to_html`]).
//!
//! It holds no value (the log holds none) and stays small however long the log: only
//! aggregates, each list capped, never one row per event. A broken log is reported, not
//! refused: its events are counted up to the break, and the page says so first.
//!
//! # Example
//!
//! ```
//! use sluice_audit::{AuditLog, Event, EventKind, StartInfo, report};
//! # let dir = std::env::temp_dir().join(format!("sluice-report-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir).unwrap();
//! let path = dir.join("audit.jsonl");
//! let start = StartInfo::new("ab".repeat(32), "cd".repeat(32));
//! let log = AuditLog::open(&path, "run-1", start)?;
//! log.record(Event::new(EventKind::Swap).secret("github_token").host("api.github.com"))?;
//! log.close()?;
//! let report = report::build(&[path])?;
//! assert!(report.intact());
//! assert_eq!(report.flows[0].swap, 1);
//! assert!(report.to_html()?.contains("api.github.com"));
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::HashMap;
use std::path::PathBuf;

use serde::Serialize;

use super::verify::scan_logs;
use super::{ChainError, Counts, EventKind, Line};

mod fix;
mod grants;
mod html;
mod timeline;

pub use grants::Suggestions;
pub use timeline::{Bucket, MAX_BUCKETS, Timeline};

/// How many rows a list shows; the rest is counted in its `more`.
const TOP_FLOWS: usize = 40;
const TOP_REASONS: usize = 30;
const TOP_NAMES: usize = 5;
const TOP_DENIED: usize = 50;
const TOP_RELOADS: usize = 50;
const TOP_WITHHELD: usize = 100;
const TOP_MATERIALIZED: usize = 50;

/// What the report says, as `--json` writes it.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The version of the sluice that wrote the report.
    pub report_version: &'static str,
    /// Each log, with its verdict and runs.
    pub logs: Vec<LogReport>,
    /// Counts over every log (as far as each verified).
    pub totals: Totals,
    /// Secret → host pairs, the busiest first.
    pub flows: Vec<Flow>,
    /// Pairs beyond [`Report::flows`], and their events.
    pub more_flows: More,
    /// `refuse` events by reason, the most frequent first.
    pub refusals: Vec<RefusalGroup>,
    /// Reasons beyond [`Report::refusals`].
    pub more_refusals: More,
    /// Denials by host and reason: `deny` events, each counted as the refusals it stands for
    /// (its `count`, one when it has none).
    pub denied: Vec<Named>,
    /// Hosts beyond [`Report::denied`].
    pub more_denied: More,
    /// `auth_fail` events by reason.
    pub auth_failures: Vec<Named>,
    /// Variables the launcher withheld from its command, over every run: the first
    /// `TOP_WITHHELD` by name.
    pub withheld: Vec<String>,
    /// How many more distinct variables were withheld.
    pub more_withheld: u64,
    /// Values handed to the command (`materialize`), by secret and where.
    pub materialized: Vec<Named>,
    /// Pairs beyond [`Report::materialized`].
    pub more_materialized: More,
    /// Grants the runs' declarations made (their `start` events' `grants`) that no `swap`
    /// used: secret, and `HOST PLACE`; a reviewer's list of what to narrow.
    pub unused_grants: Vec<Named>,
    /// Grants beyond [`Report::unused_grants`].
    pub more_unused_grants: More,
    /// What the refusals and the unused grants suggest changing in the declaration
    /// (`sluice audit suggest`), every entry.
    pub suggestions: Suggestions,
    /// Minted credentials (`mint` events), by secret and outcome: tokens minted per grant,
    /// mints refused per code, the sandbox's own token requests answered.
    pub mints: Vec<Named>,
    /// Pairs beyond [`Report::mints`].
    pub more_mints: More,
    /// Decisions on uses that waited for approval (`approve` events), by secret and what
    /// was decided, for which use, where: who decided what.
    pub approvals: Vec<Named>,
    /// Pairs beyond [`Report::approvals`].
    pub more_approvals: More,
    /// `reload` events, the first `TOP_RELOADS`.
    pub reloads: Vec<Reload>,
    /// Reloads beyond [`Report::reloads`].
    pub more_reloads: More,
    /// Events over time, refusals marked.
    pub timeline: Timeline,
}

/// One log: its files in chain order, its verdict, its runs.
#[derive(Debug, Clone, Serialize)]
pub struct LogReport {
    /// The files, first to last.
    pub files: Vec<String>,
    /// Whether its chain holds from the first line to the last.
    pub intact: bool,
    /// Where it breaks, and how.
    pub broken: Option<BrokenAt>,
    /// Its runs (up to the break).
    pub runs: Vec<RunReport>,
}

/// Where a chain breaks.
#[derive(Debug, Clone, Serialize)]
pub struct BrokenAt {
    /// The file.
    pub file: String,
    /// The 1-based line in it.
    pub line: u64,
    /// What is wrong, in a sentence.
    pub why: String,
}

/// One run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunReport {
    /// The run id.
    pub run_id: String,
    /// The sluice version that wrote it.
    pub version: String,
    /// The declaration's fingerprint (literals masked).
    pub policy_sha256: String,
    /// The run CA's fingerprint.
    pub ca_sha256: String,
    /// `ts` of `start`.
    pub started: String,
    /// `ts` of its last line.
    pub ended: String,
    /// Whether it ends with `stop`.
    pub complete: bool,
    /// Killed in the middle of a write: the length of its last line, cut short.
    pub torn: Option<u64>,
    /// Lines it wrote.
    pub events: u64,
    /// Files its lines are spread over.
    pub segments: u64,
    /// Per-kind tallies.
    pub counts: Counts,
    /// How it was started (`start`'s `settings`: the jail, `--pass-env`, the argv, ...),
    /// in the log's order.
    pub settings: Vec<(String, String)>,
}

/// Counts over the whole report.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Totals {
    /// Lines read (as far as each chain held).
    pub lines: u64,
    /// Runs.
    pub runs: u64,
    /// Per-kind tallies (`redact` counts events).
    pub counts: Counts,
    /// Values redacted: the sum of the `redact` events' counts.
    pub redacted: u64,
}

/// What passed between one secret and one host (or the command's output).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Flow {
    /// The secret.
    pub secret: String,
    /// The host, or `stdout` / `stderr` for the command's output.
    pub host: String,
    /// `swap` events.
    pub swap: u64,
    /// `verbatim` events.
    pub verbatim: u64,
    /// `refuse` events.
    pub refused: u64,
    /// Values redacted.
    pub redacted: u64,
}

impl Flow {
    /// Everything in the pair.
    pub fn total(&self) -> u64 {
        // Counts come from the log, which a forger may fill with huge ones.
        self.swap
            .saturating_add(self.verbatim)
            .saturating_add(self.refused)
            .saturating_add(self.redacted)
    }
}

/// Refusals of one reason.
#[derive(Debug, Clone, Serialize)]
pub struct RefusalGroup {
    /// The reason as the log has it (a `sluice-error` code).
    pub reason: String,
    /// How many.
    pub count: u64,
    /// The grant or change that would allow them, from the reason and the names involved.
    pub fix: String,
    /// The secrets involved, the most frequent first.
    pub secrets: Vec<Named>,
    /// The hosts, the most frequent first.
    pub hosts: Vec<Named>,
    /// The paths (query values elided, as the log has them), the most frequent first.
    pub paths: Vec<Named>,
}

/// A name and how often it came up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Named {
    /// The name.
    pub name: String,
    /// Its reason or detail, where the list has one.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub detail: String,
    /// How many events.
    pub count: u64,
}

/// Rows left out of a list, and the events in them.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct More {
    /// Rows left out.
    pub rows: u64,
    /// Events in them.
    pub events: u64,
}

/// One reload.
#[derive(Debug, Clone, Serialize)]
pub struct Reload {
    /// When.
    pub ts: String,
    /// Which run.
    pub run_id: String,
    /// In force (`reloaded`) or refused and why.
    pub result: String,
    /// The declaration it read.
    pub policy_sha256: String,
}

impl Report {
    /// Whether every log's chain holds.
    pub fn intact(&self) -> bool {
        self.logs.iter().all(|log| log.intact)
    }
}

/// Verifies the logs among `paths` (as [`super::verify_logs`] takes them) and aggregates
/// what they hold, each as far as its chain holds.
///
/// # Errors
///
/// [`ChainError::Read`] when a file cannot be read; a broken chain is in the report.
pub fn build(paths: &[PathBuf]) -> Result<Report, ChainError> {
    let mut tally = Tally::default();
    let logs = scan_logs(paths, |index, line| tally.line(index, line))?;
    let mut reports = Vec::with_capacity(logs.len());
    for (index, log) in logs.into_iter().enumerate() {
        let starts = tally.starts.remove(&index).unwrap_or_default();
        let runs = log
            .runs
            .iter()
            .zip(starts)
            .map(|(run, start)| RunReport {
                events: run.lines,
                complete: run.complete,
                torn: run.torn,
                segments: run.segments,
                counts: run.counts,
                ..start
            })
            .collect::<Vec<_>>();
        reports.push(LogReport {
            files: log.files.iter().map(|f| f.display().to_string()).collect(),
            intact: log.broken.is_none(),
            broken: log.broken.map(|err| match err {
                ChainError::Broken { file, line, why } => BrokenAt {
                    file: file.display().to_string(),
                    line,
                    why: why.to_string(),
                },
                ChainError::Read { path, source } => BrokenAt {
                    file: path.display().to_string(),
                    line: 0,
                    why: source.to_string(),
                },
            }),
            runs,
        });
    }
    Ok(tally.into_report(reports))
}

/// Everything gathered line by line.
#[derive(Default)]
struct Tally {
    /// Per log, each run's `start` fields (and its last `ts`, kept up to date).
    starts: HashMap<usize, Vec<RunReport>>,
    totals: Totals,
    flows: HashMap<(String, String), Flow>,
    refusals: HashMap<String, ReasonTally>,
    denied: HashMap<(String, String), u64>,
    auth_failures: HashMap<String, u64>,
    withheld: std::collections::BTreeSet<String>,
    materialized: HashMap<(String, String), u64>,
    mints: HashMap<(String, String), u64>,
    approvals: HashMap<(String, String), u64>,
    grants: grants::Grants,
    reloads: Vec<Reload>,
    reload_count: u64,
    minutes: timeline::Minutes,
}

#[derive(Default)]
struct ReasonTally {
    count: u64,
    /// The first refusal's names, for the fix.
    example: (Option<String>, Option<String>, Option<String>),
    secrets: HashMap<String, u64>,
    hosts: HashMap<String, u64>,
    paths: HashMap<String, u64>,
}

impl Tally {
    fn line(&mut self, log: usize, line: &Line) {
        self.totals.lines += 1;
        self.minutes.add(&line.ts, line.event == EventKind::Refuse);
        let runs = self.starts.entry(log).or_default();
        if line.event == EventKind::Start {
            self.totals.runs += 1;
            runs.push(RunReport {
                run_id: line.run_id.clone(),
                version: line.version.clone().unwrap_or_default(),
                policy_sha256: line.policy_sha256.clone().unwrap_or_default(),
                ca_sha256: line.ca_sha256.clone().unwrap_or_default(),
                started: line.ts.clone(),
                settings: line
                    .settings
                    .iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                ..RunReport::default()
            });
            self.withheld
                .extend(line.withheld.iter().flatten().cloned());
        }
        self.grants.line(line);
        if let Some(run) = runs.last_mut() {
            run.ended.clone_from(&line.ts);
        }
        self.totals.counts.add(line.event);
        let name = |field: &Option<String>| field.clone().unwrap_or_default();
        match line.event {
            EventKind::Swap | EventKind::Verbatim | EventKind::Redact => {
                let host = line.host.clone().or_else(|| line.location.clone());
                let flow = self.flow(name(&line.secret), host.unwrap_or_default());
                match line.event {
                    EventKind::Swap => flow.swap += 1,
                    EventKind::Verbatim => flow.verbatim += 1,
                    _ => {
                        let count = line.count.unwrap_or(1);
                        flow.redacted = flow.redacted.saturating_add(count);
                        self.totals.redacted = self.totals.redacted.saturating_add(count);
                    }
                }
            }
            EventKind::Refuse => {
                if let Some(secret) = &line.secret {
                    self.flow(secret.clone(), name(&line.host)).refused += 1;
                }
                let reason = line.reason.clone().unwrap_or_else(|| "(no reason)".into());
                let group = self.refusals.entry(reason).or_default();
                if group.count == 0 {
                    group.example = (
                        line.secret.clone(),
                        line.host.clone(),
                        line.location.clone(),
                    );
                }
                group.count += 1;
                for (map, field) in [
                    (&mut group.secrets, &line.secret),
                    (&mut group.hosts, &line.host),
                    (&mut group.paths, &line.path),
                ] {
                    if let Some(value) = field {
                        *map.entry(value.clone()).or_default() += 1;
                    }
                }
            }
            EventKind::Deny => {
                // One event of the jail's resolver may stand for many refused queries.
                let denied = self
                    .denied
                    .entry((name(&line.host), name(&line.reason)))
                    .or_default();
                *denied = denied.saturating_add(line.count.unwrap_or(1).max(1));
            }
            EventKind::AuthFail => {
                *self.auth_failures.entry(name(&line.reason)).or_default() += 1;
            }
            EventKind::Materialize => {
                *self
                    .materialized
                    .entry((name(&line.secret), name(&line.location)))
                    .or_default() += 1;
            }
            EventKind::Reload => {
                self.reload_count += 1;
                if self.reloads.len() < TOP_RELOADS {
                    self.reloads.push(Reload {
                        ts: line.ts.clone(),
                        run_id: line.run_id.clone(),
                        result: name(&line.reason),
                        policy_sha256: name(&line.policy_sha256),
                    });
                }
            }
            EventKind::Mint => {
                *self
                    .mints
                    .entry((name(&line.secret), mint_outcome(&name(&line.reason))))
                    .or_default() += 1;
            }
            EventKind::Approve => {
                let decided = line.approval.as_ref().map_or_else(
                    || "(no decision recorded)".to_owned(),
                    |a| {
                        format!(
                            "{} {}: {} {} (by {})",
                            a.decision,
                            if a.scope == "run" {
                                "for the run"
                            } else {
                                "once"
                            },
                            name(&line.method),
                            name(&line.host),
                            a.channel
                        )
                    },
                );
                *self
                    .approvals
                    .entry((name(&line.secret), decided))
                    .or_default() += 1;
            }
            EventKind::Start | EventKind::Stop | EventKind::Tunnel => {}
        }
    }

    fn flow(&mut self, secret: String, host: String) -> &mut Flow {
        self.flows
            .entry((secret.clone(), host.clone()))
            .or_insert_with(|| Flow {
                secret,
                host,
                ..Flow::default()
            })
    }

    fn into_report(self, logs: Vec<LogReport>) -> Report {
        let mut flows: Vec<Flow> = self.flows.into_values().collect();
        flows.sort_by(|a, b| {
            b.total()
                .cmp(&a.total())
                .then_with(|| (&a.secret, &a.host).cmp(&(&b.secret, &b.host)))
        });
        let more_flows = more(flows.iter().skip(TOP_FLOWS).map(Flow::total));
        flows.truncate(TOP_FLOWS);

        let mut refusals: Vec<RefusalGroup> = self
            .refusals
            .into_iter()
            .map(|(reason, group)| {
                let (secret, host, location) = &group.example;
                RefusalGroup {
                    fix: fix::for_refusal(
                        &reason,
                        secret.as_deref(),
                        host.as_deref(),
                        location.as_deref(),
                    ),
                    reason,
                    count: group.count,
                    secrets: top(group.secrets, TOP_NAMES),
                    hosts: top(group.hosts, TOP_NAMES),
                    paths: top(group.paths, TOP_NAMES),
                }
            })
            .collect();
        refusals.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.reason.cmp(&b.reason)));
        let more_refusals = more(refusals.iter().skip(TOP_REASONS).map(|g| g.count));
        refusals.truncate(TOP_REASONS);

        let mut denied = named_pairs(self.denied);
        let more_denied = more(denied.iter().skip(TOP_DENIED).map(|d| d.count));
        denied.truncate(TOP_DENIED);
        let suggestions = self.grants.suggestions();
        let mut unused_grants = suggestions.unused.clone();
        let more_unused_grants = more(unused_grants.iter().skip(TOP_MATERIALIZED).map(|_| 0));
        unused_grants.truncate(TOP_MATERIALIZED);
        let mut mints = named_pairs(self.mints);
        let more_mints = more(mints.iter().skip(TOP_MATERIALIZED).map(|m| m.count));
        mints.truncate(TOP_MATERIALIZED);
        let mut approvals = named_pairs(self.approvals);
        let more_approvals = more(approvals.iter().skip(TOP_MATERIALIZED).map(|a| a.count));
        approvals.truncate(TOP_MATERIALIZED);
        let mut materialized = named_pairs(self.materialized);
        let more_materialized = more(materialized.iter().skip(TOP_MATERIALIZED).map(|m| m.count));
        materialized.truncate(TOP_MATERIALIZED);
        let more_withheld = self.withheld.len().saturating_sub(TOP_WITHHELD) as u64;

        let reloads_shown = self.reloads.len() as u64;
        Report {
            report_version: env!("CARGO_PKG_VERSION"),
            logs,
            totals: self.totals,
            flows,
            more_flows,
            refusals,
            more_refusals,
            denied,
            more_denied,
            auth_failures: top(self.auth_failures, TOP_REASONS),
            withheld: self.withheld.into_iter().take(TOP_WITHHELD).collect(),
            more_withheld,
            materialized,
            more_materialized,
            mints,
            more_mints,
            approvals,
            more_approvals,
            unused_grants,
            more_unused_grants,
            suggestions,
            reloads: self.reloads,
            more_reloads: More {
                rows: self.reload_count - reloads_shown,
                events: self.reload_count - reloads_shown,
            },
            timeline: self.minutes.into_timeline(),
        }
    }
}

/// The `n` most frequent names, ties by name.
fn top(counts: HashMap<String, u64>, n: usize) -> Vec<Named> {
    let mut named: Vec<Named> = counts
        .into_iter()
        .map(|(name, count)| Named {
            name,
            detail: String::new(),
            count,
        })
        .collect();
    sort_named(&mut named);
    named.truncate(n);
    named
}

/// (name, detail) counts as rows, the most frequent first.
/// A `mint` event's reason without what varies per event (a token's lifetime, the
/// placeholder's name): `minted refresh_token`, `refused jwt_bearer: invalid_grant`,
/// `answered the sandbox's refresh_token request`.
fn mint_outcome(reason: &str) -> String {
    let end = [";", " with "]
        .iter()
        .filter_map(|cut| reason.find(cut))
        .min()
        .unwrap_or(reason.len());
    reason[..end].to_owned()
}

/// (name, detail) counts as rows, the most frequent first.
fn named_pairs(counts: HashMap<(String, String), u64>) -> Vec<Named> {
    let mut named: Vec<Named> = counts
        .into_iter()
        .map(|((name, detail), count)| Named {
            name,
            detail,
            count,
        })
        .collect();
    sort_named(&mut named);
    named
}

fn sort_named(named: &mut [Named]) {
    named.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then_with(|| (&a.name, &a.detail).cmp(&(&b.name, &b.detail)))
    });
}

fn more(left_out: impl Iterator<Item = u64>) -> More {
    left_out.fold(More::default(), |more, events| More {
        rows: more.rows + 1,
        events: more.events.saturating_add(events),
    })
}

/// Per-kind counts as rows, in schema order (for the page).
pub(crate) fn count_rows(counts: &Counts) -> Vec<(&'static str, u64)> {
    Vec::from([
        ("swap", counts.swap),
        ("verbatim", counts.verbatim),
        ("refuse", counts.refuse),
        ("redact", counts.redact),
        ("tunnel", counts.tunnel),
        ("deny", counts.deny),
        ("auth_fail", counts.auth_fail),
        ("materialize", counts.materialize),
        ("reload", counts.reload),
    ])
}

#[cfg(test)]
mod tests;
