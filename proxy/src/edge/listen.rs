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
use tokio::sync::watch;

use crate::body::Body;
use crate::edge::connect;
use crate::forward;
use crate::generation::door::Exchange;
use crate::generation::shared::{ConnSlot, Shared, serve_until_stopped, until_stopped};
use crate::refusal::Refusal;

/// Accepts until `shutdown` turns true.
pub(crate) async fn serve(
    listener: TcpListener,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
) {
    let drained = shutdown.clone();
    accept(
        listener,
        shared,
        shutdown,
        "",
        move |stream, slot, shared| serve_client(stream, shared, slot, drained.clone()),
    )
    .await;
}

/// Accepts on `listener` until `shutdown`, within the connection limit, and hands each
/// connection with its slot, and the generation of the declaration in force when it came,
/// to `serve` on a task of its own: the proxy's listener and the capture listener (`what`
/// names it in the log) alike.
pub(crate) async fn accept<F, Fut>(
    listener: TcpListener,
    mut shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
    what: &'static str,
    serve: F,
) where
    F: Fn(TcpStream, ConnSlot, Arc<Shared>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    loop {
        let accepted = tokio::select! {
            () = until_stopped(&mut shutdown) => return,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(pair) => pair,
            Err(error) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(%error, what, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = shared.connections.clone().try_acquire_owned() else {
            tracing::warn!(%peer, what, limit = shared.limits.max_connections, "connection limit reached; closing");
            continue;
        };
        // A connection serves under the generation in force when it came, to its end.
        shared = shared.current();
        tokio::spawn(serve(stream, Arc::new(permit), shared.clone()));
    }
}

/// The HTTP/1.1 server every client connection is served with, with the listener's limits
/// (the head's read timeout and size): the proxy's own and a captured one in the clear.
pub(crate) fn http1_server(limits: &crate::config::Limits) -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(limits.max_header_bytes);
    builder
}

async fn serve_client(
    stream: TcpStream,
    shared: Arc<Shared>,
    slot: ConnSlot,
    shutdown: watch::Receiver<bool>,
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
    let conn = http1_server(&shared.limits)
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    serve_until_stopped(conn, shutdown, "client").await;
}

/// The proxy protocol: authenticate, then CONNECT or plain HTTP.
async fn route(request: Request<Incoming>, shared: Arc<Shared>, slot: ConnSlot) -> Response<Body> {
    let exchange = Exchange::new(&shared, request.method().as_str());
    if let Err(refusal) = admit(&request, &shared) {
        return exchange.refuse(refusal);
    }
    // Every request on the connection is authorised, not just the first.
    if !shared.credentials.is_authorized(request.headers()) {
        let exchange = match request.uri().authority() {
            Some(authority) => exchange.host(authority.host()),
            None => exchange,
        };
        return exchange.refuse(Refusal::proxy_auth());
    }
    match Route::of(request.method(), request.uri()) {
        Route::Connect => connect::handle(request, shared, slot).await,
        Route::Plain => forward::plain(request, shared).await,
        Route::NotProxied => exchange.path(request.uri().path()).refuse(Refusal::bad_request(
            "sluice is a forward proxy: send CONNECT host:port, or an absolute-form http:// request",
        )),
    }
}

/// What every request a client sends sluice passes first, on the proxy's listener and on a
/// captured connection in the clear alike.
pub(crate) fn admit(request: &Request<Incoming>, shared: &Shared) -> Result<(), Refusal> {
    // Fail closed: without a working audit log, nothing is proxied.
    shared.audit_is_healthy()?;
    // Heads over the limit are refused whole, whatever the parser let through.
    crate::scan::headers::check_head_size(
        request.uri(),
        request.headers(),
        shared.limits.max_header_bytes,
    )
}

/// What an authorised proxy request asks for.
#[derive(Debug, PartialEq, Eq)]
enum Route {
    /// A tunnel (`CONNECT host:port`).
    Connect,
    /// A request in the clear, absolute-form (`GET http://host/path`).
    Plain,
    /// An origin-form request (`GET /path`): sent to sluice as if it were the server.
    NotProxied,
}

impl Route {
    fn of(method: &Method, uri: &http::Uri) -> Self {
        if method == Method::CONNECT {
            Self::Connect
        } else if uri.scheme().is_some() {
            Self::Plain
        } else {
            Self::NotProxied
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_tunnels_absolute_forms_go_plain_and_origin_forms_are_not_proxied() {
        let cases = [
            (Method::CONNECT, "api.test:443", Route::Connect),
            (Method::GET, "http://api.test/x", Route::Plain),
            (Method::POST, "https://api.test/x", Route::Plain),
            (Method::GET, "/x", Route::NotProxied),
            (Method::OPTIONS, "*", Route::NotProxied),
        ];
        for (method, uri, route) in cases {
            let uri: http::Uri = uri.parse().unwrap();
            assert_eq!(Route::of(&method, &uri), route, "{method} {uri}");
        }
    }
}
