//! Inbound: redaction of every intercepted response, whatever host it comes from.
//!
//! Every known value, in every encoding the guard knows, becomes its placeholder: in every
//! header (`Location`, `Set-Cookie`, `WWW-Authenticate` and the rest), in the body (streamed,
//! or whole when it is small and of known length) and in the trailers. Compressed bodies
//! are decoded to be scanned and passed on decoded, whether the coding is a content coding
//! or a transfer coding (`Transfer-Encoding: gzip, chunked`); a body in a coding sluice
//! cannot decode is refused (`502`), never passed unscanned.

use std::sync::Arc;

use http::header::{CONTENT_ENCODING, CONTENT_LENGTH, HeaderValue};
use http::{HeaderMap, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use sluice_guard::{Guard, SecretId, Tally};

use crate::body::codec::{self, ContentCoding, Decoder};
use crate::body::{self, Body};
use crate::generation::door::Exchange;
use crate::generation::shared::Shared;
use crate::refusal::{Code, Refusal};
use crate::scan::grpc;
use crate::scan::headers;
use crate::scan::stream::{Leg, Outcome, RewriteBody};

/// The largest response body redacted whole, keeping its `Content-Length`; longer ones
/// (and those of unknown length) stream, re-framed.
const SMALL_RESPONSE: usize = 64 * 1024;

/// The response on its way back: hop-by-hop headers removed, every header and the body
/// redacted (decoded first when coded), every redaction recorded.
///
/// Redacted with the guard in force when its head arrives, not the one its request was
/// served under ([`Shared::redacting`]): a value a reload brought in since is redacted too.
pub(crate) async fn redact(
    response: Response<Incoming>,
    is_head: bool,
    shared: &Arc<Shared>,
    exchange: &Exchange,
) -> Result<Response<Body>, Refusal> {
    let newer = shared.redacting();
    let under = newer.as_ref().map(|newer| exchange.under(newer));
    let (shared, exchange) = match (&newer, &under) {
        (Some(newer), Some(under)) => (newer, under),
        _ => (shared, exchange),
    };
    let (mut parts, incoming) = response.into_parts();
    // Read before the hop-by-hop headers go: a transfer coding is a coding too.
    let codings = codec::body_codings(&parts.headers);
    let transfer_coded = codec::has_transfer_coding(&parts.headers);
    headers::remove_hop_by_hop(&mut parts.headers);
    drop_reason_phrase(&mut parts.extensions);
    let tally = redact_headers(&shared.guard, &mut parts.headers);
    exchange.record_redactions("response-headers", &tally);
    let bodiless = is_head
        || parts.status.is_informational()
        || parts.status == StatusCode::NO_CONTENT
        || parts.status == StatusCode::NOT_MODIFIED;
    if bodiless {
        // No body can follow; its headers (Content-Length among them) describe the resource
        // and pass as they are, redacted.
        drop(incoming);
        return Ok(Response::from_parts(parts, body::empty()));
    }
    // A run with no secret has nothing to redact: the body passes as it came, unless it is
    // in a transfer coding, whose header went with the hop-by-hop ones: it is decoded below,
    // or the client could not read it.
    if shared.guard.is_empty() && !transfer_coded {
        return Ok(Response::from_parts(parts, body::incoming(incoming)));
    }
    let codings = codings.map_err(|e| Refusal::response_codec(&e))?;
    // A small body of known length is redacted whole and keeps an exact length: the client
    // gets the framing the upstream chose, and no streaming rewriter is set up for it.
    // The length hyper frames the body by, not the header: beside `Transfer-Encoding` a
    // `Content-Length` describes nothing. gRPC messages are redacted one by one as they
    // stream, never as one body.
    let grpc = grpc::is_grpc(&parts.headers);
    let small = http_body::Body::size_hint(&incoming)
        .exact()
        .filter(|&length| length <= SMALL_RESPONSE as u64 && !grpc);
    let inner = match small {
        Some(length) if codings.is_empty() => {
            match redact_whole(incoming, length, &mut parts.headers, shared, exchange).await? {
                Whole::Done(body) => return Ok(Response::from_parts(parts, body)),
                Whole::WithTrailers(body) => body,
            }
        }
        _ => body::incoming(incoming),
    };
    let body = redact_streamed(inner, &codings, grpc, &mut parts.headers, shared, exchange)?;
    Ok(Response::from_parts(parts, body))
}

/// What [`redact_whole`] made of a small body.
enum Whole {
    /// The body, redacted, its `Content-Length` written by sluice.
    Done(Body),
    /// A body with trailers beside its length (HTTP/2 only, rare): read, but left to the
    /// streaming rewriter, which rewrites trailers too.
    WithTrailers(Body),
}

/// Reads a small body of known `length` whole and redacts it.
async fn redact_whole(
    incoming: Incoming,
    length: u64,
    headers: &mut HeaderMap,
    shared: &Shared,
    exchange: &Exchange,
) -> Result<Whole, Refusal> {
    // Held whole, so bounded in time like the head: a stalled body gets 504.
    let timeout = shared.upstream.timeouts().response;
    let collect = http_body_util::Limited::new(incoming, SMALL_RESPONSE).collect();
    let collected = tokio::time::timeout(timeout, collect)
        .await
        .map_err(|_| {
            Refusal::gateway_timeout(format!(
                "the response body did not arrive within {}s",
                timeout.as_secs()
            ))
        })?
        .map_err(|e| {
            Refusal::bad_gateway(
                Code::UpstreamFailed,
                format!("the response body did not arrive whole: {e}"),
            )
        })?;
    let trailers = collected.trailers().cloned();
    let bytes = collected.to_bytes();
    if bytes.len() as u64 != length {
        return Err(Refusal::bad_gateway(
            Code::UpstreamFailed,
            "the response body does not match its Content-Length",
        ));
    }
    if let Some(trailers) = trailers {
        return Ok(Whole::WithTrailers(body::full_with_trailers(
            bytes, trailers,
        )));
    }
    shared.counters.scanned(bytes.len() as u64);
    // Nothing to redact (the common case): the body goes on as it came, with its length
    // written by sluice (one value, no leading zeros).
    if !shared.guard.is_match(&bytes) {
        headers.insert(CONTENT_LENGTH, HeaderValue::from(bytes.len()));
        return Ok(Whole::Done(body::full(bytes)));
    }
    let redacted = shared.guard.redact(&bytes);
    exchange.record_redactions("response-body", redacted.tally());
    // Redacted bytes hold placeholders, never a value: no copy needed to keep them zeroized.
    let mut out = redacted.into_bytes();
    headers.insert(CONTENT_LENGTH, HeaderValue::from(out.len()));
    Ok(Whole::Done(body::full(bytes::Bytes::from(std::mem::take(
        &mut *out,
    )))))
}

/// Redacts a body as it streams, decoding it first when it is coded, message by message
/// when it is gRPC.
fn redact_streamed(
    inner: Body,
    codings: &[ContentCoding],
    grpc: bool,
    headers: &mut HeaderMap,
    shared: &Shared,
    exchange: &Exchange,
) -> Result<Body, Refusal> {
    let report = exchange.reporter("response-body");
    let mut redacted = RewriteBody::redacting(inner, shared.guard.clone(), move |o: Outcome| {
        // A body sluice cut (a decompression bomb, a gRPC message it cannot scan) is a
        // refusal the client sees only as a cut stream: the audit log has it.
        report(&o.tally, o.end.as_refusal(Leg::Response), o.scanned);
    });
    if !codings.is_empty() {
        let decoder = Decoder::new(codings, shared.limits.max_decoded_body).map_err(|e| {
            Refusal::bad_gateway(Code::UpstreamEncoding, format!("the response: {e}"))
        })?;
        redacted = redacted.with_decoder(decoder);
        headers.remove(CONTENT_ENCODING);
    }
    if grpc {
        redacted = redacted.with_grpc_messages(shared.limits.max_buffered_body);
    }
    // Redaction may change the length: the client gets the body chunked (HTTP/1.1) or
    // framed by DATA frames (HTTP/2).
    headers.remove(CONTENT_LENGTH);
    Ok(BodyExt::boxed(redacted))
}

/// Drops the upstream's own reason phrase, which hyper would otherwise pass on to the client
/// byte for byte (its text is the upstream's to write, and can hold a value); the client
/// gets the canonical phrase for the status instead.
pub(crate) fn drop_reason_phrase(extensions: &mut http::Extensions) {
    extensions.remove::<hyper::ext::ReasonPhrase>();
}

/// Redacts every header value in place, and drops every header whose name holds a value in
/// any letter case (a name cannot take a placeholder: names are lowercased); returns what
/// was redacted.
pub(crate) fn redact_headers(guard: &Guard, headers: &mut HeaderMap) -> Tally {
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
