//! How the demo talks: one narrator that every printed line goes through, and the
//! readable form of an audit-log line.
//!
//! The narrator knows the real value for one purpose only: to withhold it. Should anything
//! the demo is about to print hold it (a step gone wrong), it is replaced by a notice
//! naming its length, never by any part of it.

use std::io::{self, Write};
use std::sync::Arc;

use zeroize::Zeroizing;

/// Column at which prose is wrapped.
const WIDTH: usize = 92;

/// Writes the story, withholding the real value.
pub(crate) struct Narrator<'a> {
    out: &'a mut dyn Write,
    token: Arc<Zeroizing<String>>,
}

impl<'a> Narrator<'a> {
    /// A narrator writing to `out`, withholding `token`.
    pub(crate) fn new(out: &'a mut dyn Write, token: Arc<Zeroizing<String>>) -> Self {
        Narrator { out, token }
    }

    /// `text` with every occurrence of the real value replaced by a notice.
    pub(crate) fn shown(&self, text: &str) -> String {
        if self.token.is_empty() || !text.contains(self.token.as_str()) {
            return text.to_owned();
        }
        let notice = format!("[REAL VALUE WITHHELD: {} characters]", self.token.len());
        text.replace(self.token.as_str(), &notice)
    }

    /// Whether `bytes` hold the real value.
    pub(crate) fn holds_token(&self, bytes: &[u8]) -> bool {
        let token = self.token.as_bytes();
        !token.is_empty() && bytes.windows(token.len()).any(|w| w == token)
    }

    /// One line, as given (after withholding).
    pub(crate) fn line(&mut self, text: impl AsRef<str>) -> io::Result<()> {
        let text = self.shown(text.as_ref());
        writeln!(self.out, "{text}")
    }

    /// A section heading, after a blank line.
    pub(crate) fn heading(&mut self, title: &str) -> io::Result<()> {
        self.line("")?;
        self.line(format!("== {title} =="))
    }

    /// A step's heading: `== Step N: title ==`.
    pub(crate) fn step(&mut self, step: super::Step) -> io::Result<()> {
        self.heading(&format!("Step {}: {}", step.number(), step.title()))
    }

    /// Prose wrapped at [`WIDTH`], `prefix` on the first line and its width of spaces on
    /// the others.
    pub(crate) fn wrapped(&mut self, prefix: &str, text: &str) -> io::Result<()> {
        for line in wrap(prefix, text) {
            self.line(line)?;
        }
        Ok(())
    }

    /// A block (a file, a table), indented by four spaces.
    pub(crate) fn block(&mut self, text: &str) -> io::Result<()> {
        for line in text.lines() {
            if line.is_empty() {
                self.line("")?;
            } else {
                self.line(format!("    {line}"))?;
            }
        }
        Ok(())
    }
}

/// Greedy word wrap.
pub(crate) fn wrap(prefix: &str, text: &str) -> Vec<String> {
    let indent = " ".repeat(prefix.chars().count());
    let mut lines = Vec::new();
    let mut current = prefix.to_owned();
    let mut empty = true;
    for word in text.split_whitespace() {
        let len = current.chars().count();
        if !empty && len + 1 + word.chars().count() > WIDTH {
            lines.push(std::mem::replace(&mut current, indent.clone()));
            empty = true;
        }
        if !empty {
            current.push(' ');
        }
        current.push_str(word);
        empty = false;
    }
    if !empty || lines.is_empty() {
        lines.push(current);
    }
    lines
}

/// One audit-log line in a readable form: sequence, event, then the fields it carries, and
/// the start of its `prev` link. A line that is not a JSON object is shown as it is.
pub(crate) fn audit_line(line: &str) -> String {
    let Ok(serde_json::Value::Object(fields)) = serde_json::from_str::<serde_json::Value>(line)
    else {
        return printable(line);
    };
    let text = |key: &str| fields.get(key).and_then(|v| v.as_str()).map(printable);
    let seq = fields
        .get("seq")
        .and_then(serde_json::Value::as_u64)
        .map_or_else(|| "?".to_owned(), |n| n.to_string());
    let event = text("event").unwrap_or_else(|| "?".to_owned());
    let mut parts = Vec::new();
    match event.as_str() {
        "start" => {
            if let Some(run) = text("run_id") {
                parts.push(format!("run {run}"));
            }
            if let Some(version) = text("version") {
                parts.push(format!("sluice {version}"));
            }
            if let Some(policy) = text("policy_sha256") {
                parts.push(format!("policy sha256:{}…", short(&policy)));
            }
            if let Some(ca) = text("ca_sha256") {
                parts.push(format!("CA sha256:{}…", short(&ca)));
            }
        }
        "stop" => {
            if let Some(serde_json::Value::Object(counts)) = fields.get("counts") {
                // In the schema's order, not the map's.
                let tally: Vec<String> = [
                    "swap",
                    "verbatim",
                    "refuse",
                    "redact",
                    "tunnel",
                    "deny",
                    "auth_fail",
                ]
                .iter()
                .filter_map(|kind| {
                    let n = counts.get(*kind)?.as_u64().filter(|n| *n > 0)?;
                    Some(format!("{kind} {n}"))
                })
                .collect();
                parts.push(if tally.is_empty() {
                    "no events".to_owned()
                } else {
                    tally.join(", ")
                });
            }
        }
        _ => {
            if let Some(secret) = text("secret") {
                parts.push(secret);
            }
            if let Some(host) = text("host") {
                parts.push(host);
            }
            match (text("method"), text("path")) {
                (Some(method), Some(path)) => parts.push(format!("{method} {path}")),
                (Some(one), None) | (None, Some(one)) => parts.push(one),
                (None, None) => {}
            }
            if let Some(location) = text("location") {
                parts.push(format!("in {location}"));
            }
            if let Some(count) = fields.get("count").and_then(serde_json::Value::as_u64) {
                parts.push(format!("×{count}"));
            }
            if let Some(reason) = text("reason") {
                parts.push(format!("\"{reason}\""));
            }
        }
    }
    let prev = text("prev")
        .map(|p| format!("  (prev {}…)", short(&p)))
        .unwrap_or_default();
    format!("{seq:>3} {event:<9} {}{prev}", parts.join("  "))
}

/// The first 12 characters of a digest.
fn short(digest: &str) -> String {
    digest.chars().take(12).collect()
}

/// `text` with control characters shown as `�`, so a log line cannot drive the terminal.
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '\u{fffd}' } else { c })
        .collect()
}
