//! Inbound: redaction of every intercepted response, whatever host it comes from.
//!
//! Every known value, in every encoding the guard knows, becomes its placeholder: in every
//! header (`Location`, `Set-Cookie`, `WWW-Authenticate` and the rest) and in the body,
//! streamed. Compressed bodies are decoded to be scanned and passed on decoded; a body in
//! a coding sluice cannot decode is refused, never passed unscanned.

use http::HeaderMap;
use http::header::HeaderValue;
use sluice_guard::{Guard, Tally};

/// Redacts every header value in place; returns what was redacted.
pub fn redact_headers(guard: &Guard, headers: &mut HeaderMap) -> Tally {
    let mut tally = Tally::default();
    let mut replaced = Vec::new();
    for (name, value) in headers.iter() {
        if !guard.is_match(value.as_bytes()) {
            continue;
        }
        let redacted = guard.redact(value.as_bytes());
        tally.merge(redacted.tally());
        replaced.push((name.clone(), value.clone(), redacted));
    }
    for (name, old, redacted) in replaced {
        // Placeholders are `[A-Za-z0-9_]`, so a redacted valid value stays valid; drop the
        // header rather than pass the value if that ever failed.
        let new = HeaderValue::from_bytes(redacted.bytes()).ok();
        let values: Vec<HeaderValue> = headers
            .get_all(&name)
            .iter()
            .filter_map(|v| {
                if *v == old {
                    new.clone()
                } else {
                    Some(v.clone())
                }
            })
            .collect();
        headers.remove(&name);
        for v in values {
            headers.append(name.clone(), v);
        }
    }
    tally
}
