//! The listener: accept connections within the connection limit, serve the proxy protocol
//! (HTTP/1.1: CONNECT, or absolute-form plain HTTP) on each, and drain on shutdown.
//!
//! Every proxied request, CONNECT or plain, must carry the run's proxy credentials; this is
//! the one place that checks them.

use std::convert::Infallible;
use std::sync::Arc;

use http::{Method, Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, watch};

use crate::audit::{Event, EventKind};
use crate::body::Body;
use crate::refusal::Refusal;
use crate::server::Shared;
use crate::{connect, forward};

/// Held by every task serving a client connection or a tunnel that came out of it; the
/// connection slot is free again when the last one is dropped.
pub type ConnSlot = Arc<OwnedSemaphorePermit>;

/// Accepts until `shutdown` turns true.
pub async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            _ = crate::server::until_stopped(&mut shutdown) => return,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(pair) => pair,
            Err(error) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = shared.connections.clone().try_acquire_owned() else {
            tracing::warn!(%peer, limit = shared.limits.max_connections, "connection limit reached; closing");
            continue;
        };
        let shared = shared.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            serve_client(stream, shared, Arc::new(permit), shutdown).await;
        });
    }
}

async fn serve_client(
    stream: TcpStream,
    shared: Arc<Shared>,
    slot: ConnSlot,
    mut shutdown: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let service = {
        let shared = shared.clone();
        let slot = slot.clone();
        service_fn(move |request| {
            let shared = shared.clone();
            let slot = slot.clone();
            async move { Ok::<_, Infallible>(route(request, shared, slot).await) }
        })
    };
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(shared.limits.header_read_timeout)
        .max_buf_size(shared.limits.max_header_bytes)
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    tokio::pin!(conn);
    let result = tokio::select! {
        result = conn.as_mut() => result,
        _ = crate::server::until_stopped(&mut shutdown) => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(error) = result {
        tracing::debug!(%error, "client connection ended with an error");
    }
}

/// The proxy protocol: authenticate, then CONNECT or plain HTTP.
async fn route(request: Request<Incoming>, shared: Arc<Shared>, slot: ConnSlot) -> Response<Body> {
    // Fail closed: without a working audit log, nothing is proxied.
    if !shared.audit.is_healthy() {
        return Refusal::unavailable("sluice's audit log failed; refusing to proxy")
            .into_response(&shared.guard);
    }
    if let Err(refusal) = crate::headers::check_head_size(
        request.uri(),
        request.headers(),
        shared.limits.max_header_bytes,
    ) {
        shared.record(
            Event::new(EventKind::Refuse)
                .method(request.method().as_str())
                .reason(refusal.code),
        );
        return refusal.into_response(&shared.guard);
    }
    // Every request on the connection is authorised, not just the first.
    if !shared.credentials.is_authorized(request.headers()) {
        let host = request.uri().authority().map(|a| a.host().to_owned());
        let mut event = Event::new(EventKind::AuthFail).method(request.method().as_str());
        if let Some(host) = host {
            event = event.host(host);
        }
        shared.record(event);
        return Refusal::proxy_auth().into_response(&shared.guard);
    }
    if request.method() == Method::CONNECT {
        return connect::handle(request, shared, slot).await;
    }
    if request.uri().scheme().is_some() {
        return forward::plain(request, shared).await;
    }
    let refusal = Refusal::bad_request(
        "sluice is a forward proxy: send CONNECT host:port, or an absolute-form http:// request",
    );
    shared.record(
        Event::new(EventKind::Refuse)
            .method(request.method().as_str())
            .path(request.uri().path())
            .reason(refusal.code),
    );
    refusal.into_response(&shared.guard)
}
