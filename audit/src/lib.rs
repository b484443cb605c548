//! sluice's audit log: one hash-chained JSON Lines file per run (or a chain of segments)
//! that records every swap, refusal and redaction, and its readers: `sluice audit verify`,
//! `sluice audit summary` and the reviewers' report.
//!
//! This crate owns the log's schema, its single writer ([`AuditLog`]) with segments and
//! rotation ([`Rotation`]), the hash chain (`prev` = SHA-256 of the previous line's bytes)
//! and its verification ([`verify()`], [`verify_logs`]), the per-secret, per-host tally
//! ([`summarize`]) and the one-page report ([`report`]). The schema is documented for
//! reviewers in `docs/audit-log.md`.
//!
//! It opens no socket and runs no async runtime: the writer is one thread of its own, so
//! the proxy, the launcher and the reviewers' commands all use it the same way. Errors:
//! [`AuditError`] when the log cannot open or record; [`ChainError`] is the verdict on a log
//! that does not verify (a value, kept in [`Log::broken`], as much as an error).
//!
//! # What it must never do
//!
//! - Write a secret value. The log cannot know values, so its guarantee is structural:
//!   events carry secret *names*, hosts, request paths whose query *values* are elided
//!   here (callers cannot forget), locations, counts and reasons. A method outside the
//!   standard set is written as `(nonstandard)`, never as sent. Callers must never put a
//!   value in a `reason`, and must pass a host or path that could hold a value through
//!   the guard; [`AuditLog::open_with_redactor`] lets the proxy hand that redaction to
//!   the log so it happens for every free-text field of every event.
//! - Block a request on the disk. [`AuditLog::record`] queues the event for a dedicated
//!   writer thread; it fails instead of waiting (fail closed).
//! - Let a failed log go unnoticed: once a write fails, every later
//!   [`AuditLog::record`] returns an error and the proxy refuses to proxy.
//!
//! # Example
//!
//! ```
//! use sluice_audit::{AuditLog, Event, EventKind, StartInfo};
//! # let dir = std::env::temp_dir().join(format!("sluice-audit-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir).unwrap();
//! let path = dir.join("audit.jsonl");
//! let start = StartInfo { policy_sha256: "ab".repeat(32), ca_sha256: "cd".repeat(32), withheld: vec![], placeholders: Default::default(), settings: Default::default(), grants: Default::default() };
//! let log = AuditLog::open(&path, "run-1", start)?;
//! log.record(
//!     Event::new(EventKind::Swap)
//!         .secret("github_token")
//!         .host("api.github.com")
//!         .method("GET")
//!         .path("/user?access_token=SLUICE_GITHUB_TOKEN_x")
//!         .location("query"),
//! )?;
//! log.close()?;
//! let verified = sluice_audit::verify(&path)?;
//! assert_eq!(verified.lines, 3);
//! assert!(!std::fs::read_to_string(&path)?.contains("SLUICE_GITHUB_TOKEN_x"));
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]

use std::fmt;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

mod error;
mod files;
#[cfg(feature = "report")]
pub mod report;
mod segments;
mod summary;
mod verify;
mod writer;

#[cfg(test)]
mod tests;

pub use error::AuditError;
pub use segments::{MIN_SEGMENT_BYTES, Rotation};
pub use summary::{RunSummary, Summary, SummaryRow, summarize};
pub use verify::{Break, ChainError, Log, Verified, verify, verify_logs};
pub use writer::{AuditLog, FLUSH_INTERVAL, QUEUE_CAPACITY};

/// The prefix hashed with the run id to make the first line's `prev`.
pub const GENESIS_PREFIX: &str = "sluice-audit-genesis:";

/// What the proxy tells the log about the run when it opens it; written in `start`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartInfo {
    /// SHA-256 of the declaration file's bytes, 64 lowercase hex digits.
    pub policy_sha256: String,
    /// SHA-256 of the run CA certificate's DER bytes, 64 lowercase hex digits.
    pub ca_sha256: String,
    /// The inherited variables the launcher withheld from its command (names only; empty
    /// for `sluice serve`).
    pub withheld: Vec<String>,
    /// Each secret's placeholder form at start (`plain`, `fixed`, `shaped ghp_`, `shaped`):
    /// words and public prefixes, never a placeholder or a value. Empty writes nothing.
    pub placeholders: std::collections::BTreeMap<String, String>,
    /// How the run was started, where it matters to a reviewer (the jail, `--pass-env`,
    /// `--clear-env`, `--resolve`, `--upstream-ca`, `--watch`, the command's argv): setting
    /// → what it was. Names and words, never a value (through the redactor like every
    /// free-text field). Empty writes nothing.
    pub settings: std::collections::BTreeMap<String, String>,
    /// What the declaration grants each secret toward the network: `HOST PLACE` entries
    /// (`api.github.com header`, `*.example.com query`), so that a reviewer's report can list
    /// the grants no `swap` ever used. Hosts and words, never a value. Empty writes nothing.
    pub grants: std::collections::BTreeMap<String, Vec<String>>,
}

impl StartInfo {
    /// A start that says only which declaration and which CA: no withheld variables,
    /// placeholder forms, settings or grants.
    ///
    /// ```
    /// let start = sluice_audit::StartInfo::new("ab".repeat(32), "cd".repeat(32));
    /// assert!(start.grants.is_empty());
    /// ```
    pub fn new(policy_sha256: String, ca_sha256: String) -> StartInfo {
        StartInfo {
            policy_sha256,
            ca_sha256,
            withheld: Vec::new(),
            placeholders: Default::default(),
            settings: Default::default(),
            grants: Default::default(),
        }
    }
}

/// A redaction the log applies to every free-text field of every event before it is
/// queued (the proxy passes the guard's redactor here). It receives the text after the
/// log's own elision and returns the text to write (the same `String` when there is nothing
/// to redact, which is nearly always).
pub type Redactor = Arc<dyn Fn(String) -> String + Send + Sync>;

/// The kind of an audit event: the `event` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// The run began; always line 1, written by [`AuditLog::open`].
    Start,
    /// A placeholder was swapped for its value in a granted location toward a granted host.
    Swap,
    /// A request was refused (placeholder or value where no grant allows it, misdirected
    /// request, ambiguous framing...); `reason` says why.
    Refuse,
    /// An ungranted placeholder was forwarded unchanged to an `egress.verbatim` host.
    Verbatim,
    /// Known values were turned back into placeholders in a response; `count` says how many.
    Redact,
    /// A connection was tunnelled without inspection to an `egress.passthrough` host.
    Tunnel,
    /// An egress or address refusal before any upstream connection.
    Deny,
    /// A proxy client failed authentication (`407`).
    AuthFail,
    /// The declaration was read again (`SIGHUP`, `POST /reload`): `reason` says whether it
    /// is in force (`reloaded`) or was refused and why, `policy_sha256` which file it read.
    Reload,
    /// The launcher handed a real value to the command (the `command` or `file` sink);
    /// `location` says where (`env:NAME`, `file`), names only.
    Materialize,
    /// sluice asked a token endpoint for a minted credential (`oauth2:`), or answered the
    /// sandbox's own token request with placeholders; `host` is the endpoint, `reason` the
    /// grant and the token's lifetime, or the provider's error code. Never a value.
    Mint,
    /// A person (or a decision standing for the run) decided a use of a secret that waited
    /// for approval (`approve:`): `approval` says what was decided, for how long, where.
    Approve,
    /// The run ended; always the last line, written by [`AuditLog::close`].
    Stop,
}

impl EventKind {
    /// Every kind, in schema order.
    pub const ALL: [EventKind; 13] = [
        EventKind::Start,
        EventKind::Swap,
        EventKind::Refuse,
        EventKind::Verbatim,
        EventKind::Redact,
        EventKind::Tunnel,
        EventKind::Deny,
        EventKind::AuthFail,
        EventKind::Reload,
        EventKind::Materialize,
        EventKind::Mint,
        EventKind::Approve,
        EventKind::Stop,
    ];

    /// The name written in the `event` field.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Start => "start",
            EventKind::Swap => "swap",
            EventKind::Refuse => "refuse",
            EventKind::Verbatim => "verbatim",
            EventKind::Redact => "redact",
            EventKind::Tunnel => "tunnel",
            EventKind::Deny => "deny",
            EventKind::AuthFail => "auth_fail",
            EventKind::Reload => "reload",
            EventKind::Materialize => "materialize",
            EventKind::Mint => "mint",
            EventKind::Approve => "approve",
            EventKind::Stop => "stop",
        }
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thing that happened, as the proxy reports it. Built with [`Event::new`] and the
/// setters; every field but the kind is optional and omitted from the line when unset.
///
/// Nothing here may hold a secret value: the log elides query values in [`Event::path`]
/// and replaces nonstandard methods itself, but [`Event::reason`] is written as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    kind: EventKind,
    secret: Option<String>,
    host: Option<String>,
    method: Option<String>,
    path: Option<String>,
    location: Option<String>,
    count: Option<u64>,
    reason: Option<String>,
    policy_sha256: Option<String>,
    approval: Option<Approval>,
}

/// What an `approve` event says of the decision: which waiting use (`id`, as listed by
/// `GET /v1/approvals`), `allow` or `deny`, for `once` or the `run`, made where (`admin-api`,
/// `terminal`, `webhook`), and how long the use had waited. The log writes each word only
/// when it is one of these (`(unknown)` otherwise): never free text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Approval {
    /// The waiting use's id.
    pub id: u64,
    /// `allow` or `deny`.
    pub decision: String,
    /// `once` or `run`.
    pub scope: String,
    /// Where it was decided.
    pub channel: String,
    /// How long the use waited, in milliseconds.
    pub waited_ms: u64,
}

impl Event {
    /// An event of this kind with no other field set.
    pub fn new(kind: EventKind) -> Event {
        Event {
            kind,
            secret: None,
            host: None,
            method: None,
            path: None,
            location: None,
            count: None,
            reason: None,
            policy_sha256: None,
            approval: None,
        }
    }

    /// The kind of this event.
    pub fn kind(&self) -> EventKind {
        self.kind
    }

    /// The secret this event names, if any (for the metrics).
    pub fn secret_name(&self) -> Option<&str> {
        self.secret.as_deref()
    }

    /// The secret's name (from the declaration), never its value.
    pub fn secret(mut self, name: impl Into<String>) -> Event {
        self.secret = Some(name.into());
        self
    }

    /// The host, normalised as the proxy compares it (the CONNECT host).
    pub fn host(mut self, host: impl Into<String>) -> Event {
        self.host = Some(host.into());
        self
    }

    /// The request method; one outside the standard set is written as `(nonstandard)`.
    pub fn method(mut self, method: impl Into<String>) -> Event {
        self.method = Some(method.into());
        self
    }

    /// The request target (origin-form path, or absolute form). Query values, any
    /// fragment and any userinfo are elided when the event is recorded.
    pub fn path(mut self, path: impl Into<String>) -> Event {
        self.path = Some(path.into());
        self
    }

    /// Where in the request or response: `header:<name>`, `query`, `body`, ...
    pub fn location(mut self, location: impl Into<String>) -> Event {
        self.location = Some(location.into());
        self
    }

    /// How many: redactions in one response, for `redact`.
    pub fn count(mut self, count: u64) -> Event {
        self.count = Some(count);
        self
    }

    /// Why, in a few words (refusals, denials). Written as given: never put a value here.
    pub fn reason(mut self, reason: impl Into<String>) -> Event {
        self.reason = Some(reason.into());
        self
    }

    /// The decision an `approve` event records; written only on `approve` events.
    pub fn approval(mut self, approval: Approval) -> Event {
        self.approval = Some(approval);
        self
    }

    /// The SHA-256 of the declaration a `reload` read, 64 lowercase hex digits; written only
    /// on `reload` events, and only when it is a hash.
    pub fn policy_sha256(mut self, hex: impl Into<String>) -> Event {
        self.policy_sha256 = Some(hex.into());
        self
    }
}

/// Per-kind tallies of the events between `start` and `stop`, carried by `stop`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Counts {
    /// `swap` events.
    pub swap: u64,
    /// `refuse` events.
    pub refuse: u64,
    /// `verbatim` events.
    pub verbatim: u64,
    /// `redact` events (not the sum of their counts).
    pub redact: u64,
    /// `tunnel` events.
    pub tunnel: u64,
    /// `deny` events.
    pub deny: u64,
    /// `auth_fail` events.
    pub auth_fail: u64,
    /// `materialize` events (absent from the logs of a proxy without a launcher).
    #[serde(default)]
    pub materialize: u64,
    /// `mint` events (tokens minted or refused, and the sandbox's token requests answered).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub mint: u64,
    /// `reload` events (absent from the logs of a run that never reloaded).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reload: u64,
    /// `approve` events (absent from the logs of a run that decided nothing).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub approve: u64,
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

impl Counts {
    /// Adds one event of this kind (`start` and `stop` are not counted).
    pub(crate) fn add(&mut self, kind: EventKind) {
        match kind {
            EventKind::Swap => self.swap += 1,
            EventKind::Refuse => self.refuse += 1,
            EventKind::Verbatim => self.verbatim += 1,
            EventKind::Redact => self.redact += 1,
            EventKind::Tunnel => self.tunnel += 1,
            EventKind::Deny => self.deny += 1,
            EventKind::AuthFail => self.auth_fail += 1,
            EventKind::Materialize => self.materialize += 1,
            EventKind::Mint => self.mint += 1,
            EventKind::Reload => self.reload += 1,
            EventKind::Approve => self.approve += 1,
            EventKind::Start | EventKind::Stop => {}
        }
    }
}

/// One line of the log, as written and as read back. Field order here is the order on
/// the line; unset fields are omitted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Line {
    pub(crate) seq: u64,
    pub(crate) ts: String,
    pub(crate) run_id: String,
    pub(crate) event: EventKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) secret: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) host: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) method: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) location: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) policy_sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ca_sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) withheld: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) placeholders: Option<std::collections::BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) settings: Option<std::collections::BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) grants: Option<std::collections::BTreeMap<String, Vec<String>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) counts: Option<Counts>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) approval: Option<Approval>,
    /// On a `start` appended to an existing log: the SHA-256 of the line before it, so that
    /// the runs of one file chain too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) follows: Option<String>,
    /// On a `start` appended after a line cut short (the run before was killed in the
    /// middle of a write): that line's length in bytes. The cut line stays in the file,
    /// ended by a newline this run added; `follows` names the last whole line before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) torn: Option<u64>,
    /// On the first line of each segment after a run's first (rotation): its number, from
    /// 2; the line's `prev` is the previous segment's last line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) segment: Option<u64>,
    pub(crate) prev: String,
}

impl Line {
    /// A line of this kind with only the bookkeeping fields the writer fills in.
    pub(crate) fn bare(kind: EventKind, ts: String, run_id: &str) -> Line {
        Line {
            seq: 0,
            ts,
            run_id: run_id.to_owned(),
            event: kind,
            secret: None,
            host: None,
            method: None,
            path: None,
            location: None,
            count: None,
            reason: None,
            version: None,
            policy_sha256: None,
            ca_sha256: None,
            withheld: None,
            placeholders: None,
            settings: None,
            grants: None,
            counts: None,
            approval: None,
            follows: None,
            torn: None,
            segment: None,
            prev: String::new(),
        }
    }
}

/// Longest run id accepted.
pub(crate) const MAX_RUN_ID: usize = 64;

/// The `location` of what a signing secret did: a request signed again, or refused for its
/// signature (docs/signing.md).
pub const SIGNATURE_LOCATION: &str = "signature";

/// The `prev` of line 1: lowercase hex SHA-256 of `sluice-audit-genesis:` + the run id.
pub fn genesis(run_id: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(GENESIS_PREFIX.as_bytes());
    hasher.update(run_id.as_bytes());
    hex::encode(hasher.finalize())
}

/// Lowercase hex SHA-256 of a line's bytes, without its newline: the next line's `prev`.
pub fn line_hash(line: &[u8]) -> String {
    let mut digits = [0u8; 64];
    // 32 bytes are always 64 hex digits; an empty hash would break the chain, never pass.
    match hex::encode_to_slice(Sha256::digest(line), &mut digits) {
        Ok(()) => String::from_utf8_lossy(&digits).into_owned(),
        Err(_) => String::new(),
    }
}

/// Whether a run id is usable (and safe to print): 1 to 64 of `[A-Za-z0-9._:-]`.
pub(crate) fn is_valid_run_id(run_id: &str) -> bool {
    !run_id.is_empty()
        && run_id.len() <= MAX_RUN_ID
        && run_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

/// Whether a digest is 64 lowercase hex digits.
pub(crate) fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The marker written in place of an elided value.
pub const ELIDED: &str = "…";

/// Methods written as sent; any other is written as [`NONSTANDARD_METHOD`].
const STANDARD_METHODS: &[&str] = &[
    "GET",
    "HEAD",
    "POST",
    "PUT",
    "DELETE",
    "CONNECT",
    "OPTIONS",
    "TRACE",
    "PATCH",
    "PROPFIND",
    "PROPPATCH",
    "MKCOL",
    "COPY",
    "MOVE",
    "LOCK",
    "UNLOCK",
    "REPORT",
    "SEARCH",
];

/// What a method outside the standard set is written as.
pub const NONSTANDARD_METHOD: &str = "(nonstandard)";

/// The method as written in the log: itself if standard, [`NONSTANDARD_METHOD`] otherwise
/// (a method is request data, and a sandbox may put anything there).
pub(crate) fn sanitize_method(method: &str) -> String {
    if STANDARD_METHODS.contains(&method) {
        method.to_owned()
    } else {
        NONSTANDARD_METHOD.to_owned()
    }
}

/// The request target as written in the log: each query parameter keeps its name and
/// loses its value (`a=1` → `a=…`; a bare `flag` → `…`, since it may be a value), a
/// fragment becomes `#…`, and userinfo in an absolute-form target becomes `…@`.
pub fn elide_path(target: &str) -> String {
    let (before_fragment, fragment) = match target.split_once('#') {
        Some((before, _)) => (before, true),
        None => (target, false),
    };
    let (path, query) = match before_fragment.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (before_fragment, None),
    };
    let mut out = elide_userinfo(path);
    if let Some(query) = query {
        out.push('?');
        for (i, param) in query.split('&').enumerate() {
            if i > 0 {
                out.push('&');
            }
            if param.is_empty() {
                continue;
            }
            match param.split_once('=') {
                Some((name, _)) => {
                    out.push_str(name);
                    out.push('=');
                    out.push_str(ELIDED);
                }
                None => out.push_str(ELIDED),
            }
        }
    }
    if fragment {
        out.push('#');
        out.push_str(ELIDED);
    }
    out
}

/// `scheme://user:pass@host/...` → `scheme://…@host/...`; other targets unchanged.
fn elide_userinfo(path: &str) -> String {
    if let Some(scheme_end) = path.find("://") {
        let authority_start = scheme_end + 3;
        let rest = &path[authority_start..];
        let authority_len = rest.find('/').unwrap_or(rest.len());
        if let Some(at) = rest[..authority_len].rfind('@') {
            return format!("{}{ELIDED}{}", &path[..authority_start], &rest[at..]);
        }
    }
    path.to_owned()
}

/// Cuts `s` to at most `max` bytes on a character boundary, marking the cut with `…`.
pub(crate) fn cap(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max.saturating_sub(ELIDED.len());
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push_str(ELIDED);
    }
    s
}

/// Now as RFC 3339 UTC with milliseconds, e.g. `2025-01-31T09:05:00.123Z`.
pub(crate) fn timestamp_now() -> String {
    format_timestamp(SystemTime::now())
}

/// A time as RFC 3339 UTC with milliseconds; times before 1970 are written as the epoch.
///
/// Every event carries one, so each thread keeps the text of the last second it formatted
/// and only appends the milliseconds while the second lasts.
pub(crate) fn format_timestamp(at: SystemTime) -> String {
    thread_local! {
        static LAST_SECOND: std::cell::RefCell<(u64, String)> =
            const { std::cell::RefCell::new((u64::MAX, String::new())) };
    }
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let millis = since.subsec_millis();
    LAST_SECOND.with_borrow_mut(|(second, text)| {
        if *second != secs {
            *second = secs;
            *text = format_second(secs);
        }
        let mut out = String::with_capacity(text.len() + 5);
        out.push_str(text);
        for digit in [millis / 100, millis / 10 % 10, millis % 10] {
            out.push(char::from_digit(digit, 10).unwrap_or('0'));
        }
        out.push('Z');
        out
    })
}

/// `YYYY-MM-DDTHH:MM:SS.` for a count of seconds since the epoch.
fn format_second(secs: u64) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 → (year, month, day) in the proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days`, for non-negative day counts).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}
