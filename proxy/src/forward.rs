//! One request, from the sandbox to the upstream and back, in the order the checks run.
//!
//! `intercepted` serves a request inside a terminated TLS tunnel; `plain` serves an
//! absolute-form `http://` request. Each step says why it is there. Nothing is sent
//! upstream before every check of the request head has passed.

use std::sync::Arc;

use http::header::{ACCEPT_ENCODING, CONTENT_ENCODING, CONTENT_LENGTH, HOST};
use http::request::Parts;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderValue, Method, Request, Response, StatusCode, Uri, Version};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use sluice_guard::{GuardError, OnPlaceholder, Tally};
use sluice_policies::Reach;

use crate::audit::{Event, EventKind};
use crate::authority::{self, Target};
use crate::body::{self, Body};
use crate::headers;
use crate::listen::ConnSlot;
use crate::refusal::Refusal;
use crate::rewrite::codec::{self, Decoder, Encoder};
use crate::rewrite::grpc;
use crate::rewrite::request::{Outbound, Place, PlanCache, check_authority};
use crate::rewrite::response;
use crate::rewrite::stream::{End, Outcome, RewriteBody, StreamRefused};
use crate::server::Shared;
use crate::upstream::{SendError, UpstreamError};

/// What every request of one intercepted tunnel shares.
pub struct Tunnel {
    /// The CONNECT target, which the grants were decided for.
    pub target: Target,
    /// Where its requests go upstream, formatted once for all of them.
    pub destination: Destination,
    /// The plans, decided once per tunnel and place.
    pub plans: PlanCache,
    /// The client connection's slot. Whatever outlives a request (an upgraded connection)
    /// holds a clone, so that the connection limit and the drain at shutdown count it.
    pub slot: ConnSlot,
}

/// The upstream end of a target as a request names it: the authority of the request's URI
/// and its `Host` header. Made once per tunnel, since every request on one goes to the same
/// place; once per request in the clear.
pub struct Destination {
    authority: Authority,
    host: HeaderValue,
}

impl Destination {
    /// The destination of requests toward `target` over `scheme`.
    pub fn new(target: &Target, scheme: &Scheme) -> Result<Self, Refusal> {
        let authority = target
            .authority()
            .parse()
            .map_err(|_| Refusal::bad_request("the target is not a valid authority"))?;
        Ok(Self {
            authority,
            host: host_header(target, scheme)?,
        })
    }

    /// `host:port`, IPv6 in brackets: what the audit log calls the host.
    fn authority(&self) -> &str {
        self.authority.as_str()
    }
}

/// A request inside an intercepted tunnel.
pub async fn intercepted(
    request: Request<Incoming>,
    tunnel: &Tunnel,
    shared: &Arc<Shared>,
) -> Response<Body> {
    let (parts, incoming) = request.into_parts();
    let target = &tunnel.target;
    let log = Exchange::new(shared, tunnel.destination.authority(), &parts);
    let mode = Mode::Intercepted(tunnel);
    match try_forward(parts, incoming, target, shared, mode, &log).await {
        Ok(response) => response,
        Err(refusal) => {
            shared.record(log.refusal(&refusal));
            refusal.into_response(&shared.guard)
        }
    }
}

/// An absolute-form `http://` request: forwarded to a reachable host, never swapped.
pub async fn plain(request: Request<Incoming>, shared: Arc<Shared>) -> Response<Body> {
    let (parts, incoming) = request.into_parts();
    let target = match plain_target(&parts, &shared) {
        Ok(target) => target,
        Err(refusal) => {
            // Logged with the host as sent: the audit log's redactor sees it exactly.
            let raw = Target {
                host: parts.uri.authority().map_or("", |a| a.as_str()).to_owned(),
                port: 0,
            };
            let mut event = Exchange::new(&shared, &raw.authority(), &parts).refusal(&refusal);
            event = event.host(raw.host.as_str());
            shared.record(event);
            return refusal.into_response(&shared.guard);
        }
    };
    let log = Exchange::new(&shared, &target.authority(), &parts);
    match try_forward(parts, incoming, &target, &shared, Mode::Plain, &log).await {
        Ok(response) => response,
        Err(refusal) => {
            shared.record(log.refusal(&refusal));
            refusal.into_response(&shared.guard)
        }
    }
}

/// Whether the request came through a TLS tunnel (with the tunnel's plans) or in the clear.
#[derive(Clone, Copy)]
enum Mode<'a> {
    Intercepted(&'a Tunnel),
    Plain,
}

/// The target of a plain request: an `http://` URI naming a reachable host.
fn plain_target(parts: &Parts, shared: &Arc<Shared>) -> Result<Target, Refusal> {
    if parts.uri.scheme() != Some(&Scheme::HTTP) {
        return Err(Refusal::bad_request(
            "only http:// targets may be proxied in the clear; use CONNECT for https",
        ));
    }
    let authority = parts
        .uri
        .authority()
        .ok_or_else(|| Refusal::bad_request("the request target has no host"))?;
    check_authority(&shared.guard, authority.as_str())?;
    let target = Target::parse(authority, Some(80))?;
    // The egress decision, as for a tunnel.
    if let Reach::Denied(denied) = shared.policy.reach(&target.host, target.port) {
        return Err(Refusal::host_not_allowed(
            &target.host,
            target.port,
            &denied.to_string(),
        ));
    }
    Ok(target)
}

async fn try_forward(
    mut parts: Parts,
    incoming: Incoming,
    target: &Target,
    shared: &Arc<Shared>,
    mode: Mode<'_>,
    log: &Exchange,
) -> Result<Response<Body>, Refusal> {
    // Fail closed: without a working audit log, nothing is proxied.
    if !shared.audit.is_healthy() {
        return Err(Refusal::unavailable(
            "sluice's audit log failed; refusing to proxy",
        ));
    }
    // A CONNECT inside an intercepted tunnel would ask the upstream for a tunnel whose
    // bytes nothing inspects: refused, never forwarded.
    if matches!(mode, Mode::Intercepted(_)) && parts.method == Method::CONNECT {
        return Err(Refusal::bad_request(
            "CONNECT inside an intercepted tunnel is not allowed; send CONNECT to sluice itself",
        ));
    }
    // Grants were decided for the target host: a request naming another goes nowhere.
    match mode {
        Mode::Intercepted(_) => authority::check(&parts.uri, &parts.headers, target)?,
        Mode::Plain if parts.headers.contains_key(HOST) => {
            authority::check(&Uri::from_static("/"), &parts.headers, target)?
        }
        Mode::Plain => {}
    }
    // Heads over the limit are refused whole, whatever the parser let through.
    headers::check_head_size(&parts.uri, &parts.headers, shared.limits.max_header_bytes)?;
    // Framing two parsers could read two ways is refused, never repaired.
    headers::check_framing(&parts.headers)?;
    // An upgrade (WebSocket) is noted before its hop-by-hop headers go.
    let upgrade = match mode {
        Mode::Intercepted(_) => headers::upgrade_protocol(&parts.version, &parts.headers),
        Mode::Plain => None,
    };
    // Hop-by-hop headers, the proxy's credentials among them, stop here.
    headers::remove_hop_by_hop(&mut parts.headers);
    parts.headers.remove(HOST);
    // The scan: swap where granted, refuse everything else. Plain HTTP is never swapped.
    let outbound = match mode {
        Mode::Intercepted(tunnel) => {
            Outbound::new(&shared.guard, &shared.policy, target).with_cache(&tunnel.plans)
        }
        Mode::Plain => Outbound::plain(&shared.guard, &shared.policy, target),
    };
    for swapped in outbound.rewrite_head(&mut parts)? {
        log.record_tally(&swapped.place.label(), &swapped.tally);
    }
    let stopped = StoppedBody::default();
    // An upgrade's body is scanned whole before its handshake leaves: once the upstream
    // answers 101 the connection is joined, and a refusal could no longer stop it.
    let buffering = if upgrade.is_some() {
        Buffering::Always
    } else {
        Buffering::WhenLengthKnown
    };
    let body = outbound_body(
        &outbound, &mut parts, incoming, shared, log, &stopped, buffering,
    )
    .await?;
    if let Some(protocol) = upgrade
        && let Mode::Intercepted(tunnel) = mode
    {
        let exchange = Upgrade {
            protocol,
            slot: tunnel.slot.clone(),
            destination: &tunnel.destination,
        };
        return upgrade_exchange(parts, body, exchange, target, shared, log).await;
    }
    // Responses must come back in a coding sluice can decode, to be scanned.
    if parts.headers.contains_key(ACCEPT_ENCODING) {
        parts
            .headers
            .insert(ACCEPT_ENCODING, codec::accept_encoding());
    }
    let plain;
    let (scheme, destination) = match mode {
        Mode::Intercepted(tunnel) => (Scheme::HTTPS, &tunnel.destination),
        Mode::Plain => {
            plain = Destination::new(target, &Scheme::HTTP)?;
            (Scheme::HTTP, &plain)
        }
    };
    parts.headers.insert(HOST, destination.host.clone());
    parts.uri = upstream_uri(scheme, destination, parts.uri.path_and_query())?;
    let downstream_version = parts.version;
    parts.version = Version::HTTP_11;
    let is_head = parts.method == Method::HEAD;
    let sent = shared
        .upstream
        .send(Request::from_parts(parts, body), downstream_version);
    let response = match sent.await {
        Ok(response) => response,
        Err(error) => {
            // A body sluice stopped is the secret refusal it is, not an upstream failure.
            if let Some(refused) = stopped.take() {
                return Err(outbound.refusal(GuardError::Refused(refused.refusal), &Place::Body));
            }
            return Err(send_refusal(&error, shared, target));
        }
    };
    downstream(response, is_head, shared, log).await
}

/// When a request body is buffered and rewritten whole rather than streamed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Buffering {
    /// When its length is known and within the bound (so that a refusal sends nothing),
    /// and whenever a swap may change its length and `Content-Length` must be recomputed
    /// (or its coding re-encoded): `413` beyond the bound then.
    WhenLengthKnown,
    /// Always (an upgrade's body, which must be refused before the handshake leaves).
    Always,
}

/// The request body on its way out: scanned as it streams, or buffered up to the bound and
/// rewritten whole (see [`Buffering`]).
async fn outbound_body(
    outbound: &Outbound<'_>,
    parts: &mut Parts,
    incoming: Incoming,
    shared: &Arc<Shared>,
    log: &Exchange,
    stopped: &StoppedBody,
    buffering: Buffering,
) -> Result<Body, Refusal> {
    // A run with no secret has nothing to find: the body passes as it came.
    if shared.guard.is_empty() {
        return Ok(body::incoming(incoming));
    }
    // No body at all (a GET): nothing to scan, and none goes on (no streaming rewriter is
    // set up for it, and the upstream request keeps the client's framing: none).
    if http_body::Body::is_end_stream(&incoming) && !parts.headers.contains_key(CONTENT_LENGTH) {
        return Ok(body::empty());
    }
    let plan = outbound.body_plan(parts);
    let codings = codec::content_codings(&parts.headers).map_err(|e| {
        Refusal::bad_request(format!(
            "the request body cannot be scanned: {e}; send it uncompressed"
        ))
    })?;
    let may_change = !codings.is_empty()
        || shared
            .guard
            .ids()
            .any(|id| plan.on_placeholder(id) == OnPlaceholder::Swap);
    let limit = shared.limits.max_buffered_body;
    let declared = match parts.headers.get(CONTENT_LENGTH) {
        None => None,
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .and_then(|v| v.parse::<u64>().ok())
                .ok_or_else(|| Refusal::bad_request("Content-Length is not a number"))?,
        ),
    };
    // A body whose length is known and within the bound is read whole before anything is
    // sent, whatever the host: a refusal then stops the request before its head leaves.
    // Longer ones stream, unless a swap may change their length (then `413`).
    let has_length = declared.is_some();
    let fits = declared.is_some_and(|n| n <= limit as u64);
    // gRPC messages are rewritten one by one as they stream, never as one body.
    let grpc = grpc::is_grpc(&parts.headers);
    if buffering == Buffering::Always || (!grpc && ((may_change && has_length) || fits)) {
        if declared.is_some_and(|n| n > limit as u64) {
            return Err(Refusal::too_large(limit));
        }
        // Bounded in time as in size: a trickled body would hold its buffer for ever.
        let timeout = shared.limits.body_read_timeout;
        let collected = tokio::time::timeout(
            timeout,
            http_body_util::Limited::new(incoming, limit).collect(),
        )
        .await
        .map_err(|_| Refusal::body_timeout(timeout))?
        .map_err(|_| Refusal::too_large(limit))?
        .to_bytes();
        let decoded = if codings.is_empty() {
            zeroize::Zeroizing::new(collected.to_vec())
        } else {
            let mut out = zeroize::Zeroizing::new(Vec::new());
            let mut decoder = Decoder::new(&codings, limit as u64)
                .map_err(|e| Refusal::bad_request(format!("the request body: {e}")))?;
            decoder
                .push(&collected, &mut out)
                .and_then(|()| decoder.finish(&mut out))
                .map_err(|e| Refusal::bad_request(format!("the request body: {e}")))?;
            out
        };
        let rewritten = shared
            .guard
            .rewrite(&decoded, &plan)
            .map_err(|e| outbound.refusal(e, &Place::Body))?;
        log.record_tally("body", rewritten.tally());
        let mut bytes = rewritten.into_bytes();
        if !codings.is_empty() {
            let mut encoded = Vec::new();
            let mut encoder = Encoder::new(&codings)
                .map_err(|e| Refusal::bad_request(format!("the request body: {e}")))?;
            encoder
                .push(&bytes, &mut encoded)
                .and_then(|()| encoder.finish(&mut encoded))
                .map_err(|e| Refusal::bad_request(format!("the request body: {e}")))?;
            bytes = zeroize::Zeroizing::new(encoded);
        }
        // A bodiless request (a GET handshake) stays without a length.
        if has_length || !bytes.is_empty() {
            parts
                .headers
                .insert(CONTENT_LENGTH, HeaderValue::from(bytes.len()));
        }
        return Ok(body::full(bytes::Bytes::from(std::mem::take(&mut *bytes))));
    }
    // Streamed: a refusal mid-body aborts the upstream request before the match leaves, and
    // is kept so that the client is told why.
    let report = {
        let log_report = log.reporter("body");
        let stopped = stopped.clone();
        move |outcome: Outcome| {
            if let End::Refused(refused) = &outcome.end {
                stopped.set(refused.clone());
            }
            log_report(outcome);
        }
    };
    let mut streamed =
        RewriteBody::new(body::incoming(incoming), shared.guard.clone(), plan, report)
            // Trailers are no grantable place: nothing is swapped into them.
            .with_trailer_plan(outbound.plan(&Place::Trailers));
    if !codings.is_empty() {
        let limit = shared.limits.max_decoded_body;
        let decoder = Decoder::new(&codings, limit)
            .map_err(|e| Refusal::bad_request(format!("the request body: {e}")))?;
        let encoder = Encoder::new(&codings)
            .map_err(|e| Refusal::bad_request(format!("the request body: {e}")))?;
        streamed = streamed.with_decoder(decoder).with_encoder(encoder);
    }
    if grpc {
        // Each message gets its new length; the body's no longer holds.
        parts.headers.remove(CONTENT_LENGTH);
        streamed = streamed.with_grpc_messages(limit);
    }
    Ok(BodyExt::boxed(streamed))
}

/// An upgrade (WebSocket): the handshake is scanned and swapped like any request, sent on
/// a fresh HTTP/1.1 connection, and on `101` both sides are joined. Frames after the
/// handshake are not inspected (docs/threat-model.md).
/// An upgrade a request asks for, and the connection slot its joined streams will hold.
struct Upgrade<'a> {
    protocol: HeaderValue,
    slot: ConnSlot,
    destination: &'a Destination,
}

async fn upgrade_exchange(
    mut parts: Parts,
    body: Body,
    Upgrade {
        protocol,
        slot,
        destination,
    }: Upgrade<'_>,
    target: &Target,
    shared: &Arc<Shared>,
    log: &Exchange,
) -> Result<Response<Body>, Refusal> {
    let client_side = parts
        .extensions
        .remove::<hyper::upgrade::OnUpgrade>()
        .ok_or_else(|| Refusal::bad_request("this connection cannot be upgraded"))?;
    parts.headers.insert(
        http::header::CONNECTION,
        HeaderValue::from_static("upgrade"),
    );
    parts.headers.insert(http::header::UPGRADE, protocol);
    parts.headers.insert(HOST, destination.host.clone());
    // A fresh connection speaks origin-form.
    parts.uri = parts
        .uri
        .path_and_query()
        .cloned()
        .unwrap_or_else(|| PathAndQuery::from_static("/"))
        .as_str()
        .parse()
        .map_err(|_| Refusal::bad_request("the request target is not a valid URI"))?;
    parts.version = Version::HTTP_11;
    let mut send = shared
        .upstream
        .connect_http1(&target.host, target.port)
        .await
        .map_err(|e| dial_refusal(&e))?;
    let request = Request::from_parts(parts, body);
    let timeout = shared.upstream.timeouts().response;
    let mut response = match tokio::time::timeout(timeout, send.send_request(request)).await {
        Err(_) => {
            return Err(Refusal::gateway_timeout(format!(
                "{target} did not answer the upgrade within {}s",
                timeout.as_secs()
            )));
        }
        Ok(Err(error)) => {
            return Err(Refusal::bad_gateway(
                "upstream-failed",
                format!("the upgrade exchange with {target} failed: {error}"),
            ));
        }
        Ok(Ok(response)) => response,
    };
    if response.status() != StatusCode::SWITCHING_PROTOCOLS {
        return downstream(response, false, shared, log).await;
    }
    let upstream_side = hyper::upgrade::on(&mut response);
    shared.record(
        log.event(EventKind::Tunnel)
            .reason("upgrade: frames after the handshake are not inspected"),
    );
    tokio::spawn(async move {
        // The joined streams count against the connection limit until they close.
        let _slot = slot;
        let (Ok(client), Ok(upstream)) = tokio::join!(client_side, upstream_side) else {
            return;
        };
        let mut client = hyper_util::rt::TokioIo::new(client);
        let mut upstream = hyper_util::rt::TokioIo::new(upstream);
        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
    });
    let (mut parts, _) = response.into_parts();
    response::drop_reason_phrase(&mut parts.extensions);
    let tally = response::redact_headers(&shared.guard, &mut parts.headers);
    log.record_redactions("response-headers", &tally);
    Ok(Response::from_parts(parts, body::empty()))
}

/// The response on its way back: hop-by-hop headers removed, every header and the body
/// redacted (decoded first when compressed).
async fn downstream(
    response: Response<Incoming>,
    is_head: bool,
    shared: &Arc<Shared>,
    log: &Exchange,
) -> Result<Response<Body>, Refusal> {
    let (mut parts, incoming) = response.into_parts();
    headers::remove_hop_by_hop(&mut parts.headers);
    response::drop_reason_phrase(&mut parts.extensions);
    let tally = response::redact_headers(&shared.guard, &mut parts.headers);
    log.record_redactions("response-headers", &tally);
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
    // A run with no secret has nothing to redact: the body passes as it came.
    if shared.guard.is_empty() {
        return Ok(Response::from_parts(parts, body::incoming(incoming)));
    }
    let codings = codec::content_codings(&parts.headers).map_err(|e| {
        Refusal::bad_gateway(
            "upstream-encoding",
            format!("the response cannot be scanned, so it is not passed on: {e}"),
        )
    })?;
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
                        "upstream-failed",
                        format!("the response body did not arrive whole: {e}"),
                    )
                })?;
            let trailers = collected.trailers().cloned();
            let bytes = collected.to_bytes();
            if bytes.len() as u64 != length {
                return Err(Refusal::bad_gateway(
                    "upstream-failed",
                    "the response body does not match its Content-Length",
                ));
            }
            match trailers {
                // Nothing to redact (the common case): the body goes on as it came, with
                // its length written by sluice (one value, no leading zeros).
                None if !shared.guard.is_match(&bytes) => {
                    parts
                        .headers
                        .insert(CONTENT_LENGTH, HeaderValue::from(bytes.len()));
                    return Ok(Response::from_parts(parts, body::full(bytes)));
                }
                None => {
                    let redacted = shared.guard.redact(&bytes);
                    log.record_redactions("response-body", redacted.tally());
                    // Redacted bytes hold placeholders, never a value: no copy needed to
                    // keep them zeroized.
                    let mut out = redacted.into_bytes();
                    parts
                        .headers
                        .insert(CONTENT_LENGTH, HeaderValue::from(out.len()));
                    let out = bytes::Bytes::from(std::mem::take(&mut *out));
                    return Ok(Response::from_parts(parts, body::full(out)));
                }
                // Trailers beside a length (HTTP/2 only, rare): streamed below, which
                // rewrites them too.
                Some(trailers) => body::full_with_trailers(bytes, trailers),
            }
        }
        _ => body::incoming(incoming),
    };
    let mut redacted =
        RewriteBody::redacting(inner, shared.guard.clone(), log.reporter("response-body"));
    if !codings.is_empty() {
        let decoder = Decoder::new(&codings, shared.limits.max_decoded_body)
            .map_err(|e| Refusal::bad_gateway("upstream-encoding", format!("the response: {e}")))?;
        redacted = redacted.with_decoder(decoder);
        parts.headers.remove(CONTENT_ENCODING);
    }
    if grpc {
        redacted = redacted.with_grpc_messages(shared.limits.max_buffered_body);
    }
    // Redaction may change the length: the client gets the body chunked (HTTP/1.1) or
    // framed by DATA frames (HTTP/2).
    parts.headers.remove(CONTENT_LENGTH);
    Ok(Response::from_parts(parts, BodyExt::boxed(redacted)))
}

/// The largest response body redacted whole, keeping its `Content-Length`; longer ones
/// (and those of unknown length) stream, re-framed.
const SMALL_RESPONSE: usize = 64 * 1024;

/// Where a streamed request body leaves the refusal that stopped it. hyper reports a body
/// error to the caller only as a failed exchange (and over HTTP/2 as a reset stream), so
/// the body's own report is the reliable witness.
#[derive(Clone, Default)]
struct StoppedBody(Arc<std::sync::Mutex<Option<StreamRefused>>>);

impl StoppedBody {
    fn set(&self, refused: StreamRefused) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(refused);
    }

    fn take(&self) -> Option<StreamRefused> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// The refusal for a failed exchange: blocked addresses are the client's doing (`403`); the
/// rest is the upstream's.
fn send_refusal(error: &SendError, shared: &Shared, target: &Target) -> Refusal {
    if let Some(codec) = error.find_source::<codec::CodecError>() {
        return Refusal::bad_request(format!("the request body: {codec}"));
    }
    // The client's own body failed (a malformed chunk, a cut connection): its fault, and
    // the upstream request was aborted, not completed.
    if let Some(body) = error.find_source::<hyper::Error>().filter(|e| e.is_user()) {
        let why =
            std::error::Error::source(body).map_or_else(|| body.to_string(), ToString::to_string);
        return Refusal::bad_request(format!("the request body could not be read: {why}"));
    }
    match error {
        SendError::Dial(dial) => dial_refusal(dial),
        SendError::Timeout => Refusal::gateway_timeout(format!(
            "{target} did not answer within {}s",
            shared.upstream.timeouts().response.as_secs()
        )),
        SendError::Http(why) => Refusal::bad_gateway(
            "upstream-failed",
            format!("the exchange with {target} failed: {why}"),
        ),
    }
}

/// The refusal for a failed dial: blocked addresses are the client's doing (`403`),
/// everything else the upstream's (`502`, or `504` for timeouts).
pub fn dial_refusal(error: &UpstreamError) -> Refusal {
    match error {
        UpstreamError::Blocked { host, addr, why } => {
            Refusal::address_blocked(host, &format!("{} is {why}", addr.ip()))
        }
        UpstreamError::ConnectTimeout { .. } | UpstreamError::TlsTimeout { .. } => {
            Refusal::gateway_timeout(error.to_string())
        }
        UpstreamError::Tls { .. } => Refusal::bad_gateway("upstream-tls", error.to_string()),
        UpstreamError::Resolve { .. } => Refusal::bad_gateway("dns-failure", error.to_string()),
        UpstreamError::Connect { .. } | UpstreamError::BadTarget(_) => {
            Refusal::bad_gateway("upstream-connect", error.to_string())
        }
    }
}

/// The `Host` header sent upstream: the target, without a default port.
fn host_header(target: &Target, scheme: &Scheme) -> Result<HeaderValue, Refusal> {
    let default_port = if *scheme == Scheme::HTTPS { 443 } else { 80 };
    let host = if target.port == default_port {
        if target.host.contains(':') {
            format!("[{}]", target.host)
        } else {
            target.host.clone()
        }
    } else {
        target.authority()
    };
    HeaderValue::from_str(&host).map_err(|_| Refusal::bad_request("the target is not a valid host"))
}

fn upstream_uri(
    scheme: Scheme,
    destination: &Destination,
    path: Option<&PathAndQuery>,
) -> Result<Uri, Refusal> {
    let mut uri = http::uri::Parts::default();
    uri.scheme = Some(scheme);
    uri.authority = Some(destination.authority.clone());
    uri.path_and_query = Some(
        path.cloned()
            .unwrap_or_else(|| PathAndQuery::from_static("/")),
    );
    Uri::from_parts(uri).map_err(|_| Refusal::bad_request("the request target is not a valid URI"))
}

/// What the audit log needs to know about one exchange, taken before anything is rewritten
/// (so the path logged is the one the client sent, placeholders and all).
#[derive(Clone)]
struct Exchange {
    shared: Arc<Shared>,
    host: String,
    method: String,
    path: String,
}

impl Exchange {
    fn new(shared: &Arc<Shared>, host: &str, parts: &Parts) -> Self {
        Self {
            shared: shared.clone(),
            host: host.to_owned(),
            method: parts.method.as_str().to_owned(),
            path: parts
                .uri
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .to_owned(),
        }
    }

    fn event(&self, kind: EventKind) -> Event {
        Event::new(kind)
            .host(self.host.as_str())
            .method(self.method.as_str())
            .path(self.path.as_str())
    }

    /// The audit event for a refusal: `deny` for egress and address refusals, `refuse` for
    /// everything else, with the secret and location when the refusal is about a secret.
    fn refusal(&self, refusal: &Refusal) -> Event {
        let kind = match refusal.code {
            "host-not-allowed" | "address-blocked" => EventKind::Deny,
            _ => EventKind::Refuse,
        };
        let mut event = self.event(kind).reason(refusal.code);
        if let Some(secret) = &refusal.secret {
            event = event.secret(secret.as_str());
        }
        if let Some(location) = &refusal.location {
            event = event.location(location.as_str());
        }
        event
    }

    /// `swap` and `verbatim` events for what an outbound rewrite did in one place.
    fn record_tally(&self, location: &str, tally: &Tally) {
        for (id, counts) in tally.iter() {
            let name = self.shared.guard.name(id);
            if counts.swapped > 0 {
                self.shared.record(
                    self.event(EventKind::Swap)
                        .secret(name)
                        .location(location)
                        .count(counts.swapped),
                );
            }
            if counts.kept_placeholders > 0 {
                self.shared.record(
                    self.event(EventKind::Verbatim)
                        .secret(name)
                        .location(location)
                        .count(counts.kept_placeholders)
                        .reason("egress.verbatim host: placeholder forwarded unchanged"),
                );
            }
        }
    }

    /// `redact` events for what an inbound rewrite did.
    fn record_redactions(&self, location: &str, tally: &Tally) {
        for (id, counts) in tally.iter() {
            if counts.redacted > 0 {
                self.shared.record(
                    self.event(EventKind::Redact)
                        .secret(self.shared.guard.name(id))
                        .location(location)
                        .count(counts.redacted),
                );
            }
        }
    }

    /// The callback a streamed body reports to when it ends.
    fn reporter(&self, location: &'static str) -> impl FnOnce(Outcome) + Send + 'static {
        let exchange = self.clone();
        move |outcome: Outcome| {
            exchange.record_tally(location, &outcome.tally);
            exchange.record_redactions(location, &outcome.tally);
        }
    }
}
