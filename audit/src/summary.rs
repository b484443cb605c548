//! The per-secret, per-host tally behind `sluice audit summary`: swaps, refusals by
//! reason, redactions, tunnels and denials, as a terminal table or JSON.
//!
//! It summarises only a log whose chain verifies: a tally of an edited log would be a lie.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;

use super::verify::scan_logs;
use super::{ChainError, EventKind, Line};

/// What verified logs say happened, per secret and host, over every run they hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Each run, in log order.
    pub runs: Vec<RunSummary>,
    /// How many lines the logs hold, `start` and `stop` included.
    pub events: u64,
    /// `reload` events: how often the declaration was read again (in force or refused).
    pub reloads: u64,
    /// One row per (secret, host) pair that appears in an event, sorted by secret then
    /// host; events without a secret (tunnels, denials, failed logins) have `secret: null`.
    pub rows: Vec<SummaryRow>,
}

/// One run of a verified log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RunSummary {
    /// The run named by `start`.
    pub run_id: String,
    /// How many lines the run wrote, `start` and `stop` included.
    pub events: u64,
    /// Whether the run ends with `stop`.
    pub complete: bool,
    /// Killed in the middle of a write: the length of its last line, cut short (see
    /// [`super::Verified::torn`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub torn: Option<u64>,
    /// SHA-256 of the run's last line (see [`super::Verified::head`]).
    pub head: String,
    /// How many segments its lines are spread over.
    pub segments: u64,
}

/// The tally of one (secret, host) pair.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SummaryRow {
    /// The secret's name, if the events name one.
    pub secret: Option<String>,
    /// The host, if the events name one.
    pub host: Option<String>,
    /// `swap` events.
    pub swaps: u64,
    /// `verbatim` events (ungranted placeholders forwarded unchanged).
    pub verbatim: u64,
    /// `refuse` events by reason (`(no reason)` when absent).
    pub refusals: BTreeMap<String, u64>,
    /// The sum of the `count` of `redact` events (a `redact` without `count` counts 1).
    pub redactions: u64,
    /// `tunnel` events.
    pub tunnels: u64,
    /// `deny` events.
    pub denials: u64,
    /// `auth_fail` events.
    pub auth_failures: u64,
    /// `materialize` events (values the launcher handed to the command).
    pub materialized: u64,
    /// `mint` events (tokens minted or refused at a token endpoint, and the sandbox's own
    /// token requests answered).
    pub mints: u64,
}

impl SummaryRow {
    /// All refusals, whatever the reason.
    pub fn refused(&self) -> u64 {
        self.refusals.values().sum()
    }
}

/// What a refusal without a reason is tallied under.
const NO_REASON: &str = "(no reason)";

/// Verifies the logs among `paths` (as [`super::verify_logs`] takes them) and tallies
/// every run per secret and host.
///
/// # Errors
///
/// The first break [`super::verify_logs`] finds: logs whose chain is broken are not
/// summarised.
pub fn summarize(paths: &[PathBuf]) -> Result<Summary, ChainError> {
    let mut rows: BTreeMap<(Option<String>, Option<String>), SummaryRow> = BTreeMap::new();
    let mut reloads = 0;
    let logs = scan_logs(paths, |_, line| {
        if line.event == EventKind::Reload {
            reloads += 1;
        } else {
            tally(&mut rows, line);
        }
    })?;
    let mut runs = Vec::new();
    for log in logs {
        if let Some(broken) = log.broken {
            return Err(broken);
        }
        runs.extend(log.runs.into_iter().map(|run| RunSummary {
            run_id: run.run_id,
            events: run.lines,
            complete: run.complete,
            torn: run.torn,
            head: run.head,
            segments: run.segments,
        }));
    }
    Ok(Summary {
        events: runs.iter().map(|run| run.events).sum(),
        runs,
        reloads,
        rows: rows.into_values().collect(),
    })
}

fn tally(rows: &mut BTreeMap<(Option<String>, Option<String>), SummaryRow>, line: &Line) {
    // Decisions are the report's to show, not a secret and host's traffic.
    if matches!(
        line.event,
        EventKind::Start | EventKind::Stop | EventKind::Approve
    ) {
        return;
    }
    let key = (line.secret.clone(), line.host.clone());
    let row = rows.entry(key).or_insert_with(|| SummaryRow {
        secret: line.secret.clone(),
        host: line.host.clone(),
        ..SummaryRow::default()
    });
    match line.event {
        EventKind::Swap => row.swaps += 1,
        EventKind::Verbatim => row.verbatim += 1,
        EventKind::Refuse => {
            let reason = line.reason.as_deref().unwrap_or(NO_REASON);
            *row.refusals.entry(reason.to_owned()).or_default() += 1;
        }
        EventKind::Redact => row.redactions += line.count.unwrap_or(1),
        EventKind::Tunnel => row.tunnels += 1,
        EventKind::Deny => row.denials += 1,
        EventKind::AuthFail => row.auth_failures += 1,
        EventKind::Materialize => row.materialized += 1,
        EventKind::Mint => row.mints += 1,
        EventKind::Start | EventKind::Stop | EventKind::Reload | EventKind::Approve => {}
    }
}

impl Summary {
    /// The summary as aligned plain-text tables, for a terminal: a header line, one row
    /// per secret and host, then the refusals by reason. Control characters in names are
    /// shown as `�`, so a log cannot drive the terminal.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        for run in &self.runs {
            let _ = writeln!(
                out,
                "run {}: {} events{}, chain intact{}",
                cell(&run.run_id),
                run.events,
                if run.segments > 1 {
                    format!(" in {} segments", run.segments)
                } else {
                    String::new()
                },
                match (run.complete, run.torn) {
                    (true, _) => String::new(),
                    (false, Some(torn)) => format!(
                        ", no stop record: killed in the middle of a write (its last line cut short, {torn} bytes, kept)"
                    ),
                    (false, None) =>
                        ", no stop record (run still going, ended abruptly, or tail cut)".to_owned(),
                }
            );
        }
        if self.reloads > 0 {
            let _ = writeln!(out, "declaration reloaded {} time(s)", self.reloads);
        }
        if self.rows.is_empty() {
            out.push_str("no events besides start and stop\n");
            return out;
        }
        out.push('\n');
        let mut table = vec![
            [
                "SECRET",
                "HOST",
                "SWAPS",
                "VERBATIM",
                "REFUSED",
                "REDACTED",
                "TUNNELS",
                "DENIED",
                "AUTH_FAIL",
                "MATERIALIZED",
                "MINTS",
            ]
            .map(str::to_owned)
            .to_vec(),
        ];
        for row in &self.rows {
            table.push(vec![
                or_dash(row.secret.as_deref()),
                or_dash(row.host.as_deref()),
                row.swaps.to_string(),
                row.verbatim.to_string(),
                row.refused().to_string(),
                row.redactions.to_string(),
                row.tunnels.to_string(),
                row.denials.to_string(),
                row.auth_failures.to_string(),
                row.materialized.to_string(),
                row.mints.to_string(),
            ]);
        }
        render(
            &mut out,
            &table,
            &[
                false, false, true, true, true, true, true, true, true, true, true,
            ],
        );

        let mut reasons = vec![
            ["SECRET", "HOST", "REFUSED", "REASON"]
                .map(str::to_owned)
                .to_vec(),
        ];
        for row in &self.rows {
            for (reason, n) in &row.refusals {
                reasons.push(vec![
                    or_dash(row.secret.as_deref()),
                    or_dash(row.host.as_deref()),
                    n.to_string(),
                    cell(reason),
                ]);
            }
        }
        if reasons.len() > 1 {
            out.push_str("\nrefusals by reason:\n");
            render(&mut out, &reasons, &[false, false, true, false]);
        }
        out
    }
}

/// Appends `table` with columns padded to their widest cell; `right[c]` right-aligns
/// column `c` (numbers).
fn render(out: &mut String, table: &[Vec<String>], right: &[bool]) {
    let widths: Vec<usize> = (0..right.len())
        .map(|c| {
            table
                .iter()
                .map(|r| r[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in table {
        let mut line = String::new();
        for (c, text) in row.iter().enumerate() {
            if c > 0 {
                line.push_str("  ");
            }
            let pad = " ".repeat(widths[c] - text.chars().count());
            if right[c] {
                line.push_str(&pad);
                line.push_str(text);
            } else {
                line.push_str(text);
                line.push_str(&pad);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
}

fn or_dash(value: Option<&str>) -> String {
    value.map_or_else(|| "-".to_owned(), cell)
}

/// A table cell: control characters become `�`.
fn cell(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '\u{fffd}' } else { c })
        .collect()
}
