//! An upgrade (WebSocket): the handshake is scanned and swapped like any request, sent on a
//! fresh HTTP/1.1 connection, and on `101` the frames both ways go through the WebSocket
//! relay (`crate::forward::websocket`), which scans every message.
//!
//! Over HTTP/2 the client asks with an extended CONNECT (RFC 8441, `:protocol websocket`,
//! offered by `SETTINGS_ENABLE_CONNECT_PROTOCOL`). It is turned into the HTTP/1.1
//! handshake before any check (a `GET` of its path, so request rules weigh both alike);
//! sluice makes the key the HTTP/2 client does not send, checks the upstream's
//! `Sec-WebSocket-Accept` against it, and answers the client `200` on its stream, which then
//! carries the frames.
//!
//! Only extensions the relay can read are offered to the upstream (`permessage-deflate`);
//! an answer accepting another is refused before the client is upgraded (`502`). The
//! handshake's body was scanned whole before it left. The relayed connection holds the
//! tunnel's connection slot until it closes.

use std::sync::Arc;

use http::header::{HOST, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_KEY, SEC_WEBSOCKET_VERSION};
use http::request::Parts;
use http::uri::PathAndQuery;
use http::{HeaderValue, Method, Request, Response, StatusCode, Version};
use tungstenite::handshake::derive_accept_key;

use sluice_guard::{Guard, OnPlaceholder, SecretId};

use crate::body::{self, Body};
use crate::forward::tunnel::Tunnel;
use crate::forward::websocket;
use crate::generation::door::Exchange;
use crate::generation::shared::Shared;
use crate::refusal::{Code, Refusal};
use crate::scan::request::{Outbound, Place};
use crate::scan::response;
use crate::upstream::{PinDemand, SendError};
use sluice_audit::EventKind;

/// How the client asked for the WebSocket, which decides how sluice answers it.
pub(super) enum Asked {
    /// An HTTP/1.1 `Upgrade: websocket`: the client's key and the upstream's `101` go
    /// through as they are (the client checks the accept value itself).
    Http1Upgrade(HeaderValue),
    /// An RFC 8441 extended CONNECT on HTTP/2: sluice makes the key and checks the accept
    /// value, and answers `200`.
    Http2Connect,
}

/// Turns an RFC 8441 extended CONNECT for WebSocket into the HTTP/1.1 handshake's shape (a
/// `GET` of its path); `true` when it was one.
///
/// # Errors
///
/// A `400` for an extended CONNECT of any other protocol: it would open a tunnel sluice
/// cannot read.
pub(super) fn from_extended_connect(parts: &mut Parts) -> Result<bool, Refusal> {
    let Some(protocol) = parts.extensions.remove::<hyper::ext::Protocol>() else {
        return Ok(false);
    };
    if parts.method != Method::CONNECT || !protocol.as_str().eq_ignore_ascii_case("websocket") {
        return Err(Refusal::bad_request(
            "an extended CONNECT (:protocol) is served for websocket only",
        ));
    }
    parts.method = Method::GET;
    Ok(true)
}

/// The secrets a WebSocket's messages may have swapped into them: those the body's plan
/// swaps (the relay scans each message as a body).
pub(super) fn frames_may_swap(guard: &Guard, outbound: &Outbound<'_>) -> Vec<SecretId> {
    let plan = outbound.plan(&Place::Body);
    guard
        .ids()
        .filter(|&id| plan.on_placeholder(id) == OnPlaceholder::Swap)
        .collect()
}

/// Sends the upgrade handshake upstream and, on `101`, joins the client to the upstream.
pub(super) async fn exchange(
    mut parts: Parts,
    body: Body,
    asked: Asked,
    tunnel: &Tunnel,
    pins: Option<&PinDemand>,
    shared: &Arc<Shared>,
    exchange: &Exchange,
) -> Result<Response<Body>, Refusal> {
    let client_side = parts
        .extensions
        .remove::<hyper::upgrade::OnUpgrade>()
        .ok_or_else(|| Refusal::bad_request("this connection cannot be upgraded"))?;
    parts.headers.insert(
        http::header::CONNECTION,
        HeaderValue::from_static("upgrade"),
    );
    // An HTTP/2 client sends no key: sluice makes one, and checks the answer to it.
    let key = match asked {
        Asked::Http1Upgrade(protocol) => {
            parts.headers.insert(http::header::UPGRADE, protocol);
            None
        }
        Asked::Http2Connect => {
            parts
                .headers
                .insert(http::header::UPGRADE, HeaderValue::from_static("websocket"));
            let key = new_key()?;
            parts.headers.insert(SEC_WEBSOCKET_KEY, key.clone());
            parts
                .headers
                .entry(SEC_WEBSOCKET_VERSION)
                .or_insert(HeaderValue::from_static("13"));
            Some(key)
        }
    };
    parts.headers.insert(HOST, tunnel.origin.host_header());
    // The upstream may accept only what the relay can read.
    websocket::keep_inspectable_offers(&mut parts.headers);
    let (method, path) = (parts.method.clone(), parts.uri.path().to_owned());
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
    let target = &tunnel.target;
    let timeouts = shared.upstream.timeouts();
    // The dial, the wait and the exchange fail as any request's would: one mapping
    // (`Refusal::from_send`) for both.
    let sent = async {
        let mut send = shared
            .upstream
            .connect_http1(&target.host, target.port, pins)
            .await
            .map_err(SendError::Dial)?;
        let request = Request::from_parts(parts, body);
        match tokio::time::timeout(timeouts.response, send.send_request(request)).await {
            Err(_) => Err(SendError::Timeout),
            Ok(Err(error)) => Err(SendError::Http(Box::new(error))),
            Ok(Ok(response)) => Ok(response),
        }
    };
    let mut response = sent
        .await
        .map_err(|error| Refusal::from_send(&error, timeouts, &target.to_string()))?;
    // Over HTTP/2 a 2xx would tell the client its WebSocket opened: only a 101 may.
    if key.is_some() && response.status().is_success() {
        return Err(Refusal::bad_gateway(
            Code::UpstreamFailed,
            format!("{target} answered the WebSocket upgrade without switching protocols"),
        ));
    }
    if response.status() != StatusCode::SWITCHING_PROTOCOLS {
        return response::redact(response, false, shared, exchange).await;
    }
    if let Some(key) = &key {
        let expected = derive_accept_key(key.as_bytes());
        let answered = response.headers().get(SEC_WEBSOCKET_ACCEPT);
        if answered.is_none_or(|v| v.as_bytes() != expected.as_bytes()) {
            return Err(Refusal::bad_gateway(
                Code::UpstreamFailed,
                format!(
                    "{target} answered the WebSocket upgrade without the accept value of its key"
                ),
            ));
        }
    }
    let deflate = websocket::accepted(response.headers()).map_err(|why| {
        Refusal::bad_gateway(
            Code::UpstreamFailed,
            format!("the WebSocket upgrade with {target} was refused: {why}"),
        )
    })?;
    let upstream_side = hyper::upgrade::on(&mut response);
    exchange.record(
        exchange
            .event(EventKind::Tunnel)
            .reason("upgrade: websocket frames scanned both ways"),
    );
    let relay = websocket::Relay {
        shared: shared.clone(),
        target: tunnel.target.clone(),
        method,
        path,
        exchange: exchange.clone(),
        deflate,
    };
    let slot = tunnel.slot.clone();
    // The relay reads the client's side until it ends: nothing may drain it at a close.
    tunnel.linger.off();
    tokio::spawn(async move {
        // The relayed connection counts against the connection limit until it closes.
        let _slot = slot;
        let (Ok(client), Ok(upstream)) = tokio::join!(client_side, upstream_side) else {
            return;
        };
        let client = hyper_util::rt::TokioIo::new(client);
        let upstream = hyper_util::rt::TokioIo::new(upstream);
        relay.run(client, upstream).await;
    });
    let (mut parts, _) = response.into_parts();
    response::drop_reason_phrase(&mut parts.extensions);
    if key.is_some() {
        // HTTP/2 answers an extended CONNECT with 200, and has no connection headers.
        parts.status = StatusCode::OK;
        for name in [
            http::header::CONNECTION,
            http::header::UPGRADE,
            SEC_WEBSOCKET_ACCEPT,
        ] {
            parts.headers.remove(name);
        }
    }
    // The guard in force, as for every response (`response::redact`); the relay that
    // follows is closed when a reload changes the values (`Shared::replaced`).
    match shared.redacting() {
        Some(newer) => {
            let tally = response::redact_headers(&newer.guard, &mut parts.headers);
            exchange
                .under(&newer)
                .record_redactions("response-headers", &tally);
        }
        None => {
            let tally = response::redact_headers(&shared.guard, &mut parts.headers);
            exchange.record_redactions("response-headers", &tally);
        }
    }
    Ok(Response::from_parts(parts, body::empty()))
}

/// A fresh `Sec-WebSocket-Key`: 16 random bytes, base64 (RFC 6455 section 4.1).
fn new_key() -> Result<HeaderValue, Refusal> {
    use base64::Engine;
    let mut nonce = [0u8; 16];
    getrandom::fill(&mut nonce).map_err(|e| {
        Refusal::bad_gateway(
            Code::UpstreamFailed,
            format!("no randomness for a WebSocket key: {e}"),
        )
    })?;
    let key = base64::engine::general_purpose::STANDARD.encode(nonce);
    HeaderValue::from_str(&key)
        .map_err(|_| Refusal::bad_request("a WebSocket key is not a header value"))
}
