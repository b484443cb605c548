//! Inbound: redaction of every intercepted response, whatever host it comes from.
//!
//! Every known value, in every encoding the guard knows, becomes its placeholder: in every
//! header (`Location`, `Set-Cookie`, `WWW-Authenticate` and the rest) and in the body,
//! streamed. Compressed bodies are decoded to be scanned and passed on decoded; a body in
//! a coding sluice cannot decode is refused, never passed unscanned.

use http::HeaderMap;
use http::header::HeaderValue;
use sluice_guard::{Guard, SecretId, Tally};

/// Drops the upstream's own reason phrase, which hyper would otherwise pass on to the client
/// byte for byte (its text is the upstream's to write, and can hold a value); the client
/// gets the canonical phrase for the status instead.
pub fn drop_reason_phrase(extensions: &mut http::Extensions) {
    extensions.remove::<hyper::ext::ReasonPhrase>();
}

/// Redacts every header value in place, and drops every header whose name holds a value in
/// any letter case (a name cannot take a placeholder: names are lowercased); returns what
/// was redacted.
pub fn redact_headers(guard: &Guard, headers: &mut HeaderMap) -> Tally {
    let mut tally = Tally::default();
    // Names arrive lowercased: matched without regard to case. Every value a dropped name
    // held is counted.
    let named: Vec<(http::HeaderName, Vec<SecretId>)> = headers
        .keys()
        .map(|name| (name.clone(), guard.values_in_name(name.as_str().as_bytes())))
        .filter(|(_, found)| !found.is_empty())
        .collect();
    for (name, found) in named {
        for secret in found {
            tally.add_redaction(secret);
        }
        headers.remove(&name);
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_guard::{Placeholder, SecretValue};

    const VALUE: &str = "very-secret-value-42";

    fn guard() -> Guard {
        let mut builder = Guard::builder();
        builder
            .add(
                "tok",
                Placeholder::parse("SLUICE_TOK_0123456789abcdef").unwrap(),
                SecretValue::from(VALUE),
            )
            .unwrap();
        builder.build().unwrap()
    }

    #[test]
    fn a_value_with_capitals_in_a_lowercased_name_never_passes() {
        let mut builder = Guard::builder();
        builder
            .add(
                "aws",
                Placeholder::parse("SLUICE_AWS_0123456789abcdef").unwrap(),
                SecretValue::from("AKIAIOSFODNN7EXAMPLE"),
            )
            .unwrap();
        let guard = builder.build().unwrap();
        let mut headers = HeaderMap::new();
        // What hyper hands over for `X-AKIAIOSFODNN7EXAMPLE: 1`.
        headers.insert("x-akiaiosfodnn7example", HeaderValue::from_static("1"));
        headers.insert("x-plain", HeaderValue::from_static("plain"));
        let tally = redact_headers(&guard, &mut headers);
        assert_eq!(headers.len(), 1, "{headers:?}");
        assert_eq!(headers["x-plain"], "plain");
        assert_eq!(tally.total().redacted, 1);
    }

    #[test]
    fn values_in_header_values_and_names_never_pass() {
        let mut headers = HeaderMap::new();
        headers.insert("x-leak", HeaderValue::from_static("t=very-secret-value-42"));
        headers.insert("x-very-secret-value-42", HeaderValue::from_static("named"));
        headers.insert("x-plain", HeaderValue::from_static("plain"));
        let tally = redact_headers(&guard(), &mut headers);
        assert_eq!(headers["x-leak"], "t=SLUICE_TOK_0123456789abcdef");
        assert!(!headers.contains_key("x-very-secret-value-42"));
        assert_eq!(headers["x-plain"], "plain");
        assert_eq!(headers.len(), 2);
        let redacted: u64 = tally.iter().map(|(_, counts)| counts.redacted).sum();
        assert_eq!(redacted, 2);
    }
}
