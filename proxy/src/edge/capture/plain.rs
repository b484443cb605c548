//! A captured connection in the clear: HTTP/1.1, each request served exactly as an
//! absolute-form request to the proxy is ([`crate::forward::plain`]): the egress decision on
//! its target, never a swap, a placeholder or a value in it refused. The target is the name
//! the jail's resolver handed the address out for (which `Host` must then name), else the
//! request's `Host`, at the connection's original port.
//!
//! What it must never do: take the target from anything but that name or `Host`, or skip a
//! check the proxy's own listener makes (the audit log's health, the head's size).

use std::convert::Infallible;
use std::sync::Arc;

use http::header::HOST;
use http::{Request, Response, Uri};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::body::Body;
use crate::generation::door::Exchange;
use crate::generation::shared::{ConnSlot, Shared, serve_until_stopped};
use crate::linger::{Linger, LingerSwitch};
use crate::refusal::Refusal;

/// Serves the requests of one captured plain connection, for `name` (the resolver's) or
/// each request's `Host`, at `port`.
pub(crate) async fn serve(
    stream: TcpStream,
    name: Option<String>,
    port: u16,
    shared: Arc<Shared>,
    slot: ConnSlot,
) {
    let _slot = slot;
    let shutdown = shared.shutdown.clone();
    let service = {
        let shared = shared.clone();
        service_fn(move |request| {
            let shared = shared.clone();
            let name = name.clone();
            async move { Ok::<_, Infallible>(one(request, name.as_deref(), port, shared).await) }
        })
    };
    // In the clear nothing is upgraded or relayed: the connection may linger at its close
    // so that a refusal reaches a client still sending (`linger`).
    let conn = crate::edge::listen::http1_server(&shared.limits)
        .serve_connection(
            TokioIo::new(Linger::new(
                stream,
                LingerSwitch::default(),
                shared.shutdown.clone(),
            )),
            service,
        )
        // As the proxy's listener serves it (no upgrade happens in the clear: its headers
        // are stripped).
        .with_upgrades();
    serve_until_stopped(conn, shutdown, "captured").await;
}

async fn one(
    request: Request<Incoming>,
    name: Option<&str>,
    port: u16,
    shared: Arc<Shared>,
) -> Response<Body> {
    let exchange = Exchange::new(&shared, request.method().as_str());
    if let Err(refusal) = crate::edge::listen::admit(&request, &shared) {
        return exchange.refuse(refusal);
    }
    match absolute(request, name, port) {
        Ok(request) => crate::forward::plain(request, shared).await,
        Err(refusal) => exchange.refuse(refusal),
    }
}

/// The request as the proxy would have received it: its target made absolute
/// (`http://NAME:PORT/path`), so that the egress decision and the `Host` check are the
/// proxy's own.
fn absolute(
    request: Request<Incoming>,
    name: Option<&str>,
    port: u16,
) -> Result<Request<Incoming>, Refusal> {
    let (mut parts, body) = request.into_parts();
    if parts.uri.authority().is_some() {
        return Err(Refusal::bad_request(
            "a connection sluice captured takes origin-form requests (GET /path), as a server does",
        ));
    }
    let host = match name {
        Some(name) => name.to_owned(),
        None => {
            let host = parts
                .headers
                .get(HOST)
                .and_then(|value| value.to_str().ok())
                .and_then(|value| value.parse::<http::uri::Authority>().ok())
                .ok_or_else(|| {
                    Refusal::bad_request(
                        "a plain request to an address sluice never handed out needs a Host header naming its server",
                    )
                })?;
            host.host().to_owned()
        }
    };
    let path = parts.uri.path_and_query().map_or("/", |path| path.as_str());
    parts.uri = format!("http://{host}:{port}{path}")
        .parse::<Uri>()
        .map_err(|_| Refusal::bad_request("the request's target is not a valid URI"))?;
    Ok(Request::from_parts(parts, body))
}
