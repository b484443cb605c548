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
use hyper::server::conn::http2;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use sluice_guard::Guard;
use sluice_policies::{Denied, Reach};
use tokio::net::TcpStream;

use crate::body::{self, Body};
use crate::forward;
use crate::forward::tunnel::{Origin, Tunnel};
use crate::generation::door::Exchange;
use crate::generation::shared::{ConnSlot, Shared, serve_until, serve_until_stopped};
use crate::linger::{Linger, LingerSwitch};
use crate::refusal::Refusal;
use crate::scan::request::PlanCache;
use crate::tls::target::{Target, check_authority};
use sluice_audit::EventKind;

/// Handles one CONNECT request.
pub(crate) async fn handle(
    request: Request<Incoming>,
    shared: Arc<Shared>,
    slot: ConnSlot,
) -> Response<Body> {
    let target = match connect_target(request.uri(), &shared.guard) {
        Ok(target) => target,
        Err(refusal) => {
            let raw = request.uri().to_string();
            return Exchange::new(&shared, "CONNECT").host(raw).refuse(refusal);
        }
    };
    // The egress decision, before anything is dialled.
    let exchange = Exchange::new(&shared, "CONNECT").host(target.authority());
    let reach = match shared.policy.reach(&target.host, target.port) {
        // A host that waits for a person's decision (`egress.ask`) instead of being refused.
        Reach::Denied(Denied::NotAllowed { .. })
            if shared.policy.asks(&target.host, target.port) =>
        {
            match crate::edge::ask::hold(&shared, &target).await {
                Ok(()) => Reach::Intercept,
                Err(refusal) => return exchange.refuse(refusal),
            }
        }
        reach => reach,
    };
    match reach {
        Reach::Denied(denied) => exchange.refuse(Refusal::host_not_allowed(
            &target.host,
            target.port,
            &denied.to_string(),
        )),
        Reach::Passthrough => passthrough(request, target, shared, slot, exchange).await,
        Reach::Intercept => {
            tokio::spawn(async move {
                match hyper::upgrade::on(request).await {
                    Ok(upgraded) => {
                        intercept(TokioIo::new(upgraded), target, shared, slot, exchange).await;
                    }
                    Err(error) => tracing::debug!(%error, "CONNECT upgrade failed"),
                }
            });
            established()
        }
    }
}

/// The target a CONNECT names: refused when it holds a secret (it would leave with the first
/// DNS lookup; checked on the target as sent), or when it is not `host:port`.
fn connect_target(uri: &http::Uri, guard: &Guard) -> Result<Target, Refusal> {
    check_authority(guard, &uri.to_string())?;
    Target::from_connect(uri)
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
    exchange: Exchange,
) -> Response<Body> {
    // Dialled before the `200`, so that a refused address is an answer, not a broken tunnel.
    let mut upstream = match open_passthrough(&target, &shared, &exchange).await {
        Ok(stream) => stream,
        Err(refusal) => return exchange.refuse(refusal),
    };
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

/// A passthrough host reached without a CONNECT (a connection the jail captured): dialled
/// through the address policy, then copied without inspection. A refused dial is the
/// refusal a CONNECT gets, recorded: no response can carry it.
pub(crate) async fn tunnel_passthrough(
    mut client: tokio::net::TcpStream,
    target: Target,
    shared: Arc<Shared>,
    slot: ConnSlot,
    exchange: Exchange,
) {
    let _slot = slot;
    match open_passthrough(&target, &shared, &exchange).await {
        Ok(mut upstream) => {
            let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
        }
        Err(refusal) => exchange.record_refusal(&refusal),
    }
}

/// The one dial of a passthrough host, for both edges: through the address policy, the
/// tunnel recorded once it is open.
async fn open_passthrough(
    target: &Target,
    shared: &Shared,
    exchange: &Exchange,
) -> Result<TcpStream, Refusal> {
    let upstream = shared
        .upstream
        .dial(&target.host, target.port)
        .await
        .map_err(|error| Refusal::from_dial(&error))?;
    exchange.record(
        exchange
            .event(EventKind::Tunnel)
            .reason("passthrough: not inspected, no swap, no redaction"),
    );
    Ok(upstream)
}

/// Terminates TLS and serves the tunnel's requests over HTTP/2 or HTTP/1.1, as ALPN chose.
///
/// The tunnel was answered `200` already, so what goes wrong here has no response to carry
/// it: it is recorded (`deny`) and the connection closed.
pub(crate) async fn intercept<IO>(
    io: IO,
    target: Target,
    shared: Arc<Shared>,
    slot: ConnSlot,
    exchange: Exchange,
) where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    // Every request on this tunnel goes to the same place: named once.
    let origin = match Origin::new(&target, Scheme::HTTPS) {
        Ok(origin) => origin,
        Err(refusal) => {
            // Unreachable for a normalised host; refused and logged like a handshake refusal.
            let host = shared.guard.redact_str(&target.authority());
            tracing::info!(target = %host, error = %refusal.message, "no upstream name for the tunnel");
            exchange.record_refusal(&refusal);
            return;
        }
    };
    let accepted = shared.terminator.accept(io, &target).await;
    shared.counters.tls_handshake(accepted.is_ok());
    let (tls, is_h2) = match accepted {
        Ok(accepted) => accepted,
        Err(refused) => {
            // The reason quotes the client's SNI, which is the client's to spell: it goes
            // through the guard before it is logged anywhere.
            let why = shared.guard.redact_str(&refused.to_string());
            tracing::info!(target = %target, error = %why, "client TLS handshake refused");
            exchange.record_refusal(&Refusal::tls_handshake_refused(why));
            return;
        }
    };
    // Every request on this tunnel has the same target, so the same plans.
    let tunnel = Arc::new(Tunnel {
        target,
        origin,
        plans: PlanCache::default(),
        slot,
        linger: LingerSwitch::default(),
    });
    let linger = tunnel.linger.clone();
    let service = {
        // Values minted or rotated since the tunnel opened are known to its requests: the
        // snapshot is moved on once per change, not rebuilt per request.
        let snapshot = Arc::new(arc_swap::ArcSwap::new(shared.clone()));
        service_fn(move |request| {
            let mut shared = snapshot.load_full();
            let fresh = shared.values_in_force();
            if !Arc::ptr_eq(&fresh, &shared) {
                snapshot.store(fresh.clone());
                shared = fresh;
            }
            let tunnel = tunnel.clone();
            // Boxed: the request path's future is large (every step in one state machine),
            // and hyper moves the service's future into a task per HTTP/2 stream; moving a
            // pointer instead of the whole future is what `memmove` spent most on.
            async move {
                let exchange = Box::pin(forward::intercepted(request, &tunnel, &shared));
                Ok::<_, Infallible>(exchange.await)
            }
        })
    };
    let io = TokioIo::new(tls);
    let shutdown = shared.shutdown.clone();
    if is_h2 {
        let conn = http2::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .max_concurrent_streams(shared.limits.h2_max_streams)
            .max_header_list_size(shared.limits.max_header_bytes as u32)
            // RFC 8441: WebSocket over HTTP/2, whose frames the relay scans as over HTTP/1.1.
            .enable_connect_protocol()
            .serve_connection(io, service);
        // A reload that replaces the declaration sends it GOAWAY: the client moves to a new
        // tunnel, under the declaration in force, rather than multiplex for ever on this one.
        serve_until(conn, shutdown, shared.replaced(false), "intercepted").await;
    } else {
        // A refusal answered before the request's body was read is not lost to a reset
        // when the connection closes: the client's rest is drained first (`linger`).
        let io = TokioIo::new(Linger::new(io.into_inner(), linger, shutdown.clone()));
        let conn = crate::edge::listen::http1_server(&shared.limits)
            .serve_connection(io, service)
            .with_upgrades();
        serve_until_stopped(conn, shutdown, "intercepted").await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connect_target_is_host_port_and_holds_no_secret() {
        let yaml = r#"
version: 1
secrets:
  tok:
    value: "Tok-Value-0001"
    hosts: ["api.test"]
"#;
        let (_, guard) = crate::testing::declared(yaml, "connect.yaml");
        let placeholder = guard
            .placeholder(guard.id("tok").unwrap())
            .as_str()
            .to_owned();
        let target = |raw: &str| connect_target(&raw.parse().unwrap(), &guard);
        let api = target("API.test.:8443").unwrap();
        assert_eq!((api.host.as_str(), api.port), ("api.test", 8443));
        let cases = [
            ("api.test", "bad-request".to_owned()),
            ("api.test:0", "bad-request".into()),
            ("Tok-Value-0001.api.test:443", "secret-value-refused".into()),
            ("tok-value-0001.api.test:443", "secret-value-refused".into()),
            (
                &*format!("{placeholder}.api.test:443"),
                "placeholder-not-granted".into(),
            ),
        ];
        for (raw, code) in &cases {
            let refusal = target(raw).unwrap_err();
            assert_eq!(refusal.code.as_str(), code, "{raw}");
            if refusal.secret.is_some() {
                assert_eq!(refusal.location.as_deref(), Some("host"), "{raw}");
            }
        }
    }
}
