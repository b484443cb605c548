//! An upgrade (WebSocket): the handshake is scanned and swapped like any request, sent on a
//! fresh HTTP/1.1 connection, and on `101` the frames both ways go through the WebSocket
//! relay (`crate::websocket`), which scans every message.
//!
//! Only extensions the relay can read are offered to the upstream (`permessage-deflate`);
//! an answer accepting another is refused before the client is upgraded (`502`). The
//! handshake's body was scanned whole before it left. The relayed connection holds the
//! tunnel's connection slot until it closes.

use std::sync::Arc;

use http::header::HOST;
use http::request::Parts;
use http::uri::PathAndQuery;
use http::{HeaderValue, Request, Response, StatusCode, Version};

use sluice_guard::{Guard, OnPlaceholder, SecretId};

use crate::audit::EventKind;
use crate::body::{self, Body};
use crate::exchange::Exchange;
use crate::refusal::{Code, Refusal};
use crate::rewrite::request::{Outbound, Place};
use crate::rewrite::response;
use crate::shared::Shared;
use crate::tunnel::Tunnel;
use crate::upstream::PinDemand;
use crate::websocket;

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
    protocol: HeaderValue,
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
    parts.headers.insert(http::header::UPGRADE, protocol);
    parts.headers.insert(HOST, tunnel.destination.host_header());
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
    let mut send = shared
        .upstream
        .connect_http1(&tunnel.target.host, tunnel.target.port, pins)
        .await
        .map_err(|e| Refusal::from_dial(&e))?;
    let request = Request::from_parts(parts, body);
    let target = &tunnel.target;
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
                Code::UpstreamFailed,
                format!("the upgrade exchange with {target} failed: {error}"),
            ));
        }
        Ok(Ok(response)) => response,
    };
    if response.status() != StatusCode::SWITCHING_PROTOCOLS {
        return response::redact(response, false, shared, exchange).await;
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
    let tally = response::redact_headers(&shared.guard, &mut parts.headers);
    exchange.record_redactions("response-headers", &tally);
    Ok(Response::from_parts(parts, body::empty()))
}
