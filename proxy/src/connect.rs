//! CONNECT: the egress decision for a tunnel, then passthrough or interception.
//!
//! A host neither granted to a secret nor in `egress.allow` is refused here with `403`,
//! before anything is dialled. A `passthrough` host is dialled (through the address policy)
//! before the `200`, so that a refused address is an answer, not a broken tunnel; its bytes
//! are then copied without inspection. Every other reachable host is intercepted: TLS is
//! terminated with the run CA and each request is served by `forward`.

use std::convert::Infallible;
use std::sync::Arc;

use http::uri::Scheme;
use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use sluice_policies::Reach;

use crate::audit::{Event, EventKind};
use crate::authority::Target;
use crate::body::{self, Body};
use crate::forward::{self, Destination, Tunnel};
use crate::listen::ConnSlot;
use crate::refusal::Refusal;
use crate::rewrite::request::{PlanCache, check_authority};
use crate::server::Shared;

/// Handles one CONNECT request.
pub async fn handle(
    request: Request<Incoming>,
    shared: Arc<Shared>,
    slot: ConnSlot,
) -> Response<Body> {
    // A secret in the host name would leave with the first DNS lookup: refuse it here, on
    // the target as sent.
    let raw = request.uri().to_string();
    if let Err(refusal) = check_authority(&shared.guard, &raw) {
        let mut event = Event::new(EventKind::Refuse)
            .host(raw)
            .method("CONNECT")
            .reason(refusal.code);
        if let Some(secret) = &refusal.secret {
            event = event.secret(secret.as_str()).location("host");
        }
        shared.record(event);
        return refusal.into_response(&shared.guard);
    }
    let target = match Target::from_connect(request.uri()) {
        Ok(target) => target,
        Err(refusal) => return refusal.into_response(&shared.guard),
    };
    match shared.policy.reach(&target.host, target.port) {
        Reach::Denied(denied) => {
            let refusal = Refusal::host_not_allowed(&target.host, target.port, &denied.to_string());
            shared.record(
                Event::new(EventKind::Deny)
                    .host(target.authority())
                    .method("CONNECT")
                    .reason(refusal.code),
            );
            refusal.into_response(&shared.guard)
        }
        Reach::Passthrough => passthrough(request, target, shared, slot).await,
        Reach::Intercept => {
            tokio::spawn(async move {
                match hyper::upgrade::on(request).await {
                    Ok(upgraded) => intercept(TokioIo::new(upgraded), target, shared, slot).await,
                    Err(error) => tracing::debug!(%error, "CONNECT upgrade failed"),
                }
            });
            established()
        }
    }
}

fn established() -> Response<Body> {
    let mut response = Response::new(body::empty());
    *response.status_mut() = StatusCode::OK;
    response
}

async fn passthrough(
    request: Request<Incoming>,
    target: Target,
    shared: Arc<Shared>,
    slot: ConnSlot,
) -> Response<Body> {
    let mut upstream = match shared.upstream.dial(&target.host, target.port).await {
        Ok(stream) => stream,
        Err(error) => {
            let refusal = forward::dial_refusal(&error);
            shared.record(
                Event::new(EventKind::Deny)
                    .host(target.authority())
                    .method("CONNECT")
                    .reason(refusal.code),
            );
            return refusal.into_response(&shared.guard);
        }
    };
    shared.record(
        Event::new(EventKind::Tunnel)
            .host(target.authority())
            .method("CONNECT")
            .reason("passthrough: not inspected, no swap, no redaction"),
    );
    tokio::spawn(async move {
        let _slot = slot;
        match hyper::upgrade::on(request).await {
            Ok(upgraded) => {
                let mut client = TokioIo::new(upgraded);
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            }
            Err(error) => tracing::debug!(%error, "CONNECT upgrade failed"),
        }
    });
    established()
}

/// Terminates TLS and serves the tunnel's requests over HTTP/2 or HTTP/1.1, as ALPN chose.
async fn intercept<IO>(io: IO, target: Target, shared: Arc<Shared>, slot: ConnSlot)
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    // Every request on this tunnel goes to the same place: named once.
    let destination = match Destination::new(&target, &Scheme::HTTPS) {
        Ok(destination) => destination,
        Err(refusal) => {
            // Unreachable for a normalised host; refused and logged like a handshake refusal.
            let host = shared.guard.redact_str(&target.authority());
            tracing::info!(target = %host, error = %refusal.message, "no upstream name for the tunnel");
            shared.record(
                Event::new(EventKind::Deny)
                    .host(host)
                    .method("CONNECT")
                    .reason(refusal.code),
            );
            return;
        }
    };
    let (tls, is_h2) = match shared.terminator.accept(io, &target).await {
        Ok(accepted) => accepted,
        Err(refused) => {
            // The reason quotes the client's SNI, which is the client's to spell: it goes
            // through the guard before it is logged anywhere.
            let why = shared.guard.redact_str(&refused.to_string());
            tracing::info!(target = %target, error = %why, "client TLS handshake refused");
            shared.record(
                Event::new(EventKind::Deny)
                    .host(target.authority())
                    .method("CONNECT")
                    .reason(format!("tls-handshake-refused: {why}")),
            );
            return;
        }
    };
    // Every request on this tunnel has the same target, so the same plans.
    let tunnel = Arc::new(Tunnel {
        target,
        destination,
        plans: PlanCache::default(),
        slot,
    });
    let service = {
        let shared = shared.clone();
        service_fn(move |request| {
            let shared = shared.clone();
            let tunnel = tunnel.clone();
            async move { Ok::<_, Infallible>(forward::intercepted(request, &tunnel, &shared).await) }
        })
    };
    let io = TokioIo::new(tls);
    let mut shutdown = shared.shutdown.clone();
    let result = if is_h2 {
        let conn = http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .max_concurrent_streams(shared.limits.h2_max_streams)
            .max_header_list_size(shared.limits.max_header_bytes as u32)
            .serve_connection(io, service);
        tokio::pin!(conn);
        tokio::select! {
            result = conn.as_mut() => result,
            _ = crate::server::until_stopped(&mut shutdown) => {
                conn.as_mut().graceful_shutdown();
                conn.await
            }
        }
    } else {
        let conn = http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(shared.limits.header_read_timeout)
            .max_buf_size(shared.limits.max_header_bytes)
            .serve_connection(io, service)
            .with_upgrades();
        tokio::pin!(conn);
        tokio::select! {
            result = conn.as_mut() => result,
            _ = crate::server::until_stopped(&mut shutdown) => {
                conn.as_mut().graceful_shutdown();
                conn.await
            }
        }
    };
    if let Err(error) = result {
        tracing::debug!(%error, "intercepted connection ended with an error");
    }
}
