//! What the soak concludes from what it saw, and how it says it: each judge adds its
//! figures to the [`Summary`] and a line to the violations for every invariant broken;
//! [`text`] is the report printed at the end.

use std::io::Read;
use std::path::Path;
use std::sync::atomic::Ordering;

use super::body::StreamScan;
use super::load::{Kind, Tally};
use super::minted::{Endpoint, TOKEN_PREFIX};
use super::{Range, Sample, SoakArgs, Summary, held, upstream, websocket};

/// The long-lived WebSockets: no value in an answer, and no end but a reload's `1012`
/// (bar the share of unexpected answers the load is allowed).
pub(super) fn judge_websockets(
    sockets: websocket::WsTally,
    args: &SoakArgs,
    summary: &mut Summary,
    violations: &mut Vec<String>,
) {
    if sockets.leaks > 0 {
        violations.push(format!(
            "{} WebSocket answers held a real value",
            sockets.leaks
        ));
    }
    let answered = Answered {
        what: "WebSocket questions",
        expected: "answered or restarted by a reload",
        ran: args.websockets > 0,
        answers: sockets.answers,
        unexpected: sockets.unexpected,
        reasons: &sockets.reasons,
    };
    answered.judge(args, violations);
    summary.websockets = sockets;
}

/// The held HTTP/2 tunnels: no value in an answer, and no failure but a `GOAWAY` that
/// left a request untaken (bar the share of unexpected answers the load is allowed).
pub(super) fn judge_held(
    tunnels: held::HeldTally,
    args: &SoakArgs,
    summary: &mut Summary,
    violations: &mut Vec<String>,
) {
    for leak in tunnels.leaks.iter().take(10) {
        violations.push(format!(
            "a held HTTP/2 tunnel received the real value: {leak}"
        ));
    }
    let answered = Answered {
        what: "requests on held HTTP/2 tunnels",
        expected: "answered, or untaken after GOAWAY",
        ran: args.held_tunnels > 0,
        answers: tunnels.answers,
        unexpected: tunnels.unexpected,
        reasons: &tunnels.reasons,
    };
    answered.judge(args, violations);
    summary.held_tunnels = tunnels;
}

/// What a kind of long-lived connection saw, for the two checks both kinds get.
struct Answered<'a> {
    what: &'static str,
    expected: &'static str,
    /// Whether any ran (none asked for: nothing to judge).
    ran: bool,
    answers: u64,
    unexpected: u64,
    reasons: &'a [String],
}

impl Answered<'_> {
    /// At least one answer came back as it must, and the unexpected ones stay within the
    /// share the load is allowed.
    fn judge(&self, args: &SoakArgs, violations: &mut Vec<String>) {
        let (what, unexpected, reasons) = (self.what, self.unexpected, self.reasons);
        if self.ran && self.answers == 0 {
            violations.push(format!(
                "none of the {what} was {}: {unexpected} unexpected: {reasons:?}",
                self.expected
            ));
        }
        let asked = self.answers + unexpected;
        let percent = 100.0 * unexpected as f64 / asked.max(1) as f64;
        if percent > args.max_unexpected_percent {
            violations.push(format!(
                "{unexpected} of {asked} {what} ({percent:.2}%) were not {}: {reasons:?}",
                self.expected
            ));
        }
    }
}

pub(super) fn judge_load(
    tally: &Tally,
    args: &SoakArgs,
    summary: &mut Summary,
    violations: &mut Vec<String>,
) {
    summary.requests = tally.total();
    summary.unexpected = tally.unexpected();
    summary.h1_requests = tally.h1;
    summary.h2_requests = tally.h2;
    summary.tunnels = tally.tunnels;
    summary.resent = tally.resent;
    for kind in Kind::all(args.mint_lifetime.is_some()) {
        let counts = tally.kinds.get(&kind).cloned().unwrap_or_default();
        if counts.expected == 0 {
            violations.push(format!(
                "no {} request got what it must ({} unexpected: {:?})",
                kind.name(),
                counts.unexpected,
                counts.reasons
            ));
        }
        summary.kinds.push((kind.name().to_owned(), counts));
    }
    let percent = 100.0 * summary.unexpected as f64 / summary.requests.max(1) as f64;
    if percent > args.max_unexpected_percent {
        violations.push(format!(
            "{} of {} requests ({percent:.2}%) got something other than their kind requires, over the {}% allowed",
            summary.unexpected, summary.requests, args.max_unexpected_percent
        ));
    }
    for leak in tally.leaks.iter().take(10) {
        violations.push(format!("the client received the real value: {leak}"));
    }
}

pub(super) fn judge_upstream(
    record: &upstream::Record,
    summary: &mut Summary,
    violations: &mut Vec<String>,
) {
    let load = |n: &std::sync::atomic::AtomicU64| n.load(Ordering::Relaxed);
    summary.upstream_requests = load(&record.requests);
    summary.upstream_swaps = load(&record.swaps);
    summary.retired_swaps = load(&record.retired_swaps);
    summary.stale_swaps = load(&record.stale_swaps);
    if summary.stale_swaps > 0 {
        violations.push(format!(
            "a rotated-out value reached the upstream {} times on tunnels opened after its rotation was in force",
            summary.stale_swaps
        ));
    }
    summary.bad_tls_attempts = load(&record.bad_tls_attempts);
    let leaks = load(&record.leak_count);
    if leaks > 0 {
        let described = record.leaks.lock().unwrap_or_else(|e| e.into_inner());
        violations.push(format!(
            "the real value reached the upstream {leaks} times outside the granted header: {}",
            described.join("; ")
        ));
    }
    if summary.upstream_swaps == 0 {
        violations.push("the upstream never saw a swapped header".to_owned());
    }
    let arrived = load(&record.refused_arrived);
    if arrived > 0 {
        violations.push(format!(
            "{arrived} requests that sluice must refuse reached the upstream"
        ));
    }
    let handshakes = load(&record.bad_tls_handshakes);
    if handshakes > 0 {
        violations.push(format!(
            "sluice completed {handshakes} handshakes with the upstream whose certificate names another host"
        ));
    }
}

/// Requests sent again because sluice closed their connection first, or refused them as
/// `421 tunnel-outdated` (a token minted after a reload, asked for on a tunnel opened
/// before it). Each is excused only on a tunnel opened before a reload was asked (the load
/// counts any other as unexpected); and each reload in force may do each once to each
/// worker's connection (a kept-alive one, one opened just before it).
pub(super) fn judge_resent(summary: &Summary, violations: &mut Vec<String>) {
    let explained = 3 * summary.concurrency as u64 * (summary.reloads_in_force + 1);
    if summary.resent > explained {
        violations.push(format!(
            "sluice closed {} connections before their request went out; {} reloads in force explain at most {explained}",
            summary.resent, summary.reloads_in_force
        ));
    }
}

/// The minted credential: every token refreshed before it expired (none arrived expired
/// or unknown), about one mint per lifetime (not one per request or per reload), each
/// mint in the audit log, and no token in the audit log or sluice's stderr (the client's
/// answers were searched as they came).
pub(super) fn judge_minted(
    endpoint: &Endpoint,
    secs: f64,
    audit: &str,
    stderr: &[u8],
    summary: &mut Summary,
    violations: &mut Vec<String>,
) {
    let mut tally = endpoint.tally();
    tally.audit_mints = audit
        .lines()
        .filter(|line| line.contains("\"event\":\"mint\""))
        .count() as u64;
    if tally.expired > 0 || tally.unknown > 0 {
        violations.push(format!(
            "the API got {} expired and {} unknown minted tokens: sluice must refresh before expiry",
            tally.expired, tally.unknown
        ));
    }
    if tally.refused_token_requests > 0 {
        violations.push(format!(
            "the token endpoint refused {} of sluice's token requests",
            tally.refused_token_requests
        ));
    }
    let lifetimes = secs / tally.lifetime_s.max(1) as f64;
    // Refreshed in the last quarter of each token's life: one mint per ¾ lifetime, or so.
    let (fewest, most) = (
        lifetimes.floor() as u64,
        (2.0 * lifetimes).ceil() as u64 + 2,
    );
    if tally.tokens < fewest || tally.tokens > most {
        violations.push(format!(
            "{} tokens minted in {secs:.0} s of {}-second tokens; expected {fewest} to {most}",
            tally.tokens, tally.lifetime_s
        ));
    }
    if tally.audit_mints != tally.tokens + tally.refused_token_requests {
        violations.push(format!(
            "{} mint events in the audit log for {} token requests",
            tally.audit_mints,
            tally.tokens + tally.refused_token_requests
        ));
    }
    if audit.contains(TOKEN_PREFIX) {
        violations.push("a minted token appeared in the audit log".to_owned());
    }
    if super::body::contains(stderr, TOKEN_PREFIX.as_bytes()) {
        violations.push("a minted token appeared in sluice's stderr".to_owned());
    }
    summary.minted = Some(tally);
}

/// The files of the audit log in `dir`, oldest first: its numbered segments (`audit.jsonl.N`,
/// by `N`), then `audit.jsonl`.
pub(super) fn audit_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut segments: Vec<(u64, std::path::PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let number = name.strip_prefix("audit.jsonl.")?.parse().ok()?;
            Some((number, entry.path()))
        })
        .collect();
    segments.sort();
    let mut files: Vec<_> = segments.into_iter().map(|(_, path)| path).collect();
    files.push(dir.join("audit.jsonl"));
    files
}

/// The whole audit log in `dir` as text, segments first (empty where a file cannot be read).
pub(super) fn audit_text(dir: &Path) -> String {
    audit_files(dir)
        .iter()
        .map(|file| std::fs::read_to_string(file).unwrap_or_default())
        .collect()
}

/// The audit log in `dir` (every segment): its chain verified, with a `stop`, swaps and
/// refusals in it, and no value anywhere in it.
pub(super) fn judge_audit(
    dir: &Path,
    values: &[Vec<u8>],
    summary: &mut Summary,
    violations: &mut Vec<String>,
) {
    match sluice_audit::verify(dir) {
        Ok(verified) => {
            summary.audit_events = verified.lines;
            summary.audit_swaps = verified.counts.swap;
            summary.audit_refusals = verified.counts.refuse;
            summary.audit_redactions = verified.counts.redact;
            summary.audit_files = audit_files(dir).len() as u64;
            if !verified.complete {
                violations.push("the audit log has no stop record".to_owned());
            }
            if verified.counts.refuse == 0 || verified.counts.swap == 0 {
                violations.push(format!(
                    "the audit log records {} swaps and {} refusals; expected both",
                    verified.counts.swap, verified.counts.refuse
                ));
            }
        }
        Err(e) => violations.push(format!("`sluice audit verify` fails: {e}")),
    }
    for path in audit_files(dir) {
        let mut scans: Vec<StreamScan> = values.iter().map(|v| StreamScan::new(v)).collect();
        match std::fs::File::open(&path) {
            Ok(mut file) => {
                let mut buf = vec![0u8; 1 << 20];
                while let Ok(n) = file.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    scans.iter_mut().for_each(|scan| scan.push(&buf[..n]));
                }
                if scans.iter().any(StreamScan::found) {
                    violations.push(format!(
                        "the real value appeared in the audit log ({})",
                        path.display()
                    ));
                }
            }
            Err(e) => violations.push(format!("cannot read {}: {e}", path.display())),
        }
    }
}

pub(super) fn judge_resources(
    samples: &[Sample],
    secs: u64,
    concurrency: usize,
    args: &SoakArgs,
    summary: &mut Summary,
    violations: &mut Vec<String>,
) {
    let warmup = secs as f64 * 0.2;
    let (warm, after): (Vec<Sample>, Vec<Sample>) = samples.iter().partition(|s| s.at_s < warmup);
    let range = |set: &[Sample], f: fn(&Sample) -> u64| Range::of(set.iter().map(f));
    let (Some(rss_warm), Some(fds_warm), Some(rss_after), Some(fds_after)) = (
        range(&warm, |s| s.rss_kib),
        range(&warm, |s| s.fds),
        range(&after, |s| s.rss_kib),
        range(&after, |s| s.fds),
    ) else {
        violations.push(format!(
            "too few samples of sluice's memory and descriptors ({} in {secs} s)",
            samples.len()
        ));
        return;
    };
    summary.rss_warmup_kib = rss_warm;
    summary.rss_after_kib = rss_after;
    summary.fds_warmup = fds_warm;
    summary.fds_after = fds_after;
    summary.rss_bound_kib = rss_warm.max + args.rss_growth_mib * 1024;
    summary.fd_bound = fds_warm.max + args.fd_slack.unwrap_or(2 * concurrency as u64);
    if rss_after.max > summary.rss_bound_kib {
        violations.push(format!(
            "resident memory grew to {} KiB after the warm-up, over the bound of {} KiB (warm-up peak + {} MiB)",
            rss_after.max, summary.rss_bound_kib, args.rss_growth_mib
        ));
    }
    if fds_after.max > summary.fd_bound {
        violations.push(format!(
            "open descriptors grew to {} after the warm-up, over the bound of {} (warm-up peak {} + slack)",
            fds_after.max, summary.fd_bound, fds_warm.max
        ));
    }
}

/// The summary as a short text.
pub(super) fn text(summary: &Summary) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "sluice soak: {:.0} s at concurrency {}: {} requests ({} HTTP/1.1, {} HTTP/2) on {} new tunnels, {} unexpected",
        summary.secs,
        summary.concurrency,
        summary.requests,
        summary.h1_requests,
        summary.h2_requests,
        summary.tunnels,
        summary.unexpected
    );
    let _ = writeln!(
        out,
        "  {:<24} {:>10} {:>10}",
        "kind", "as-required", "unexpected"
    );
    for (name, counts) in &summary.kinds {
        let _ = writeln!(
            out,
            "  {name:<24} {:>10} {:>10}",
            counts.expected, counts.unexpected
        );
        for reason in &counts.reasons {
            let _ = writeln!(out, "      e.g. {reason}");
        }
    }
    let ws = &summary.websockets;
    let _ = writeln!(
        out,
        "  websockets: {} opened, {} answers redacted, {} closed with 1012 by a reload and reopened, {} unexpected, {} leaks",
        ws.opened, ws.answers, ws.restarts, ws.unexpected, ws.leaks
    );
    for reason in &ws.reasons {
        let _ = writeln!(out, "      e.g. {reason}");
    }
    let held = &summary.held_tunnels;
    let _ = writeln!(
        out,
        "  held HTTP/2 tunnels: {} opened, {} echoes redacted, {} ended by GOAWAY (or 421 tunnel-outdated) and reopened, {} unexpected, {} leaks",
        held.opened,
        held.answers,
        held.goaways,
        held.unexpected,
        held.leaks.len()
    );
    for reason in &held.reasons {
        let _ = writeln!(out, "      e.g. {reason}");
    }
    let _ = writeln!(
        out,
        "  upstream: {} requests, {} with the value swapped in; {} connections to the wrong-certificate upstream, none completed",
        summary.upstream_requests, summary.upstream_swaps, summary.bad_tls_attempts
    );
    let _ = writeln!(
        out,
        "  audit log: {} events ({} swaps, {} refusals, {} redactions) in {} file(s)",
        summary.audit_events,
        summary.audit_swaps,
        summary.audit_refusals,
        summary.audit_redactions,
        summary.audit_files
    );
    let asked = summary.reloads_asked;
    if asked.valid + asked.invalid > 0 {
        let _ = writeln!(
            out,
            "  reloads: {} valid (in force: {}), {} invalid (refused, the declaration kept: {}); {} requests sent again on a new tunnel after sluice closed theirs first",
            asked.valid,
            summary.reloads_in_force,
            asked.invalid,
            summary.reloads_refused,
            summary.resent
        );
        let _ = writeln!(
            out,
            "  rotations: {} (in force: {}; {} with the declaration rewritten in the same reload); the old value swapped {} times on tunnels opened before its rotation, {} after",
            asked.rotations,
            asked.rotations_in_force,
            asked.rotations_with_declaration,
            summary.retired_swaps,
            summary.stale_swaps
        );
    }
    if let Some(minted) = &summary.minted {
        let _ = writeln!(
            out,
            "  minted: {} tokens of {} s ({} mint events); the API saw {} live, {} expired, {} unknown; {} token requests refused",
            minted.tokens,
            minted.lifetime_s,
            minted.audit_mints,
            minted.live,
            minted.expired,
            minted.unknown,
            minted.refused_token_requests
        );
    }
    let _ = writeln!(
        out,
        "  RSS KiB: warm-up {}..{}, after {}..{} (bound {})",
        summary.rss_warmup_kib.min,
        summary.rss_warmup_kib.max,
        summary.rss_after_kib.min,
        summary.rss_after_kib.max,
        summary.rss_bound_kib
    );
    let _ = writeln!(
        out,
        "  open fds: warm-up {}..{}, after {}..{} (bound {})",
        summary.fds_warmup.min,
        summary.fds_warmup.max,
        summary.fds_after.min,
        summary.fds_after.max,
        summary.fd_bound
    );
    if summary.violations.is_empty() {
        let _ = write!(out, "  verdict: PASS");
    } else {
        let _ = write!(
            out,
            "  verdict: FAIL ({} violations)",
            summary.violations.len()
        );
    }
    out
}
