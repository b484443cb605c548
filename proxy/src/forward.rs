//! One request, from the sandbox to the upstream and back, in the order the checks run.
//!
//! `intercepted` serves a request inside a terminated TLS tunnel; `plain` serves an
//! absolute-form `http://` request. Each step says why it is there.

use std::sync::Arc;

use http::header::HOST;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{Request, Response, Uri, Version};
use hyper::body::Incoming;
use sluice_policies::Reach;

use crate::audit::{Event, EventKind};
use crate::authority::{self, Target};
use crate::body::{self, Body};
use crate::headers;
use crate::refusal::Refusal;
use crate::server::Shared;
use crate::upstream::{SendError, UpstreamError};

/// A request inside an intercepted tunnel to `target`.
pub async fn intercepted(
    request: Request<Incoming>,
    target: &Target,
    shared: &Arc<Shared>,
) -> Response<Body> {
    match try_intercepted(request, target, shared).await {
        Ok(response) => response,
        Err(refusal) => refusal.into_response(),
    }
}

async fn try_intercepted(
    request: Request<Incoming>,
    target: &Target,
    shared: &Arc<Shared>,
) -> Result<Response<Body>, Refusal> {
    let (mut parts, incoming) = request.into_parts();
    // Fail closed: without a working audit log, nothing is proxied.
    if !shared.audit.is_healthy() {
        return Err(Refusal::unavailable(
            "sluice's audit log failed; refusing to proxy",
        ));
    }
    // Grants were decided for the CONNECT host: a request naming another goes nowhere.
    if let Err(refusal) = authority::check(&parts.uri, &parts.headers, target) {
        shared.record(refusal_event(&refusal, target, &parts.method, &parts.uri));
        return Err(refusal);
    }
    // Framing two parsers could read two ways is refused, never repaired.
    headers::check_framing(&parts.headers)?;
    // Hop-by-hop headers, the proxy's credentials among them, stop here.
    headers::remove_hop_by_hop(&mut parts.headers);
    parts.headers.remove(HOST);
    parts.uri = upstream_uri(Scheme::HTTPS, target, parts.uri.path_and_query())?;
    parts.version = Version::HTTP_11;
    let request = Request::from_parts(parts, body::incoming(incoming));
    let method = request.method().clone();
    let path = request.uri().clone();
    let response = send(shared, request, target, &method, &path).await?;
    Ok(downstream(response))
}

/// An absolute-form `http://` request: forwarded to a reachable host, never swapped.
pub async fn plain(request: Request<Incoming>, shared: Arc<Shared>) -> Response<Body> {
    match try_plain(request, &shared).await {
        Ok(response) => response,
        Err(refusal) => refusal.into_response(),
    }
}

async fn try_plain(
    request: Request<Incoming>,
    shared: &Arc<Shared>,
) -> Result<Response<Body>, Refusal> {
    let (mut parts, incoming) = request.into_parts();
    if parts.uri.scheme() != Some(&Scheme::HTTP) {
        return Err(Refusal::bad_request(
            "only http:// targets may be proxied in the clear; use CONNECT for https",
        ));
    }
    let authority = parts
        .uri
        .authority()
        .ok_or_else(|| Refusal::bad_request("the request target has no host"))?;
    let target = Target::parse(authority, Some(80))?;
    // The egress decision, as for a tunnel.
    if let Reach::Denied(denied) = shared.policy.reach(&target.host, target.port) {
        let refusal = Refusal::host_not_allowed(&target.host, target.port, &denied.to_string());
        shared.record(refusal_event(&refusal, &target, &parts.method, &parts.uri));
        return Err(refusal);
    }
    // The Host header, if any, must agree with the target.
    authority::check(&Uri::from_static("/"), &parts.headers, &target).or_else(|refusal| {
        if parts.headers.contains_key(HOST) {
            Err(refusal)
        } else {
            Ok(())
        }
    })?;
    headers::check_framing(&parts.headers)?;
    headers::remove_hop_by_hop(&mut parts.headers);
    parts.headers.remove(HOST);
    parts.uri = upstream_uri(Scheme::HTTP, &target, parts.uri.path_and_query())?;
    parts.version = Version::HTTP_11;
    let request = Request::from_parts(parts, body::incoming(incoming));
    let method = request.method().clone();
    let path = request.uri().clone();
    let response = send(shared, request, &target, &method, &path).await?;
    Ok(downstream(response))
}

/// Sends upstream; a failure becomes a refusal, logged.
async fn send(
    shared: &Arc<Shared>,
    mut request: Request<Body>,
    target: &Target,
    method: &http::Method,
    uri: &Uri,
) -> Result<Response<Incoming>, Refusal> {
    // hyper-util adds no Host (set_host is off), so name the target exactly once here.
    let host_header = if (target.port == 443 && uri.scheme() == Some(&Scheme::HTTPS))
        || (target.port == 80 && uri.scheme() == Some(&Scheme::HTTP))
    {
        target.host.clone()
    } else {
        target.authority()
    };
    request.headers_mut().insert(
        HOST,
        http::HeaderValue::from_str(&host_header).map_err(|_| Refusal::bad_request("bad host"))?,
    );
    match shared.upstream.send(request).await {
        Ok(response) => Ok(response),
        Err(error) => {
            let refusal = match error {
                SendError::Dial(dial) => dial_refusal(&dial),
                SendError::Timeout => Refusal::gateway_timeout(format!(
                    "{target} did not answer within {}s",
                    shared.upstream_timeouts.response.as_secs()
                )),
                SendError::Http(why) => Refusal::bad_gateway(
                    "upstream-failed",
                    format!("the exchange with {target} failed: {why}"),
                ),
            };
            shared.record(refusal_event(&refusal, target, method, uri));
            Err(refusal)
        }
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

/// The response on its way back: hop-by-hop headers removed.
fn downstream(response: Response<Incoming>) -> Response<Body> {
    let (mut parts, incoming) = response.into_parts();
    headers::remove_hop_by_hop(&mut parts.headers);
    Response::from_parts(parts, body::incoming(incoming))
}

fn upstream_uri(
    scheme: Scheme,
    target: &Target,
    path: Option<&PathAndQuery>,
) -> Result<Uri, Refusal> {
    let authority: Authority = target
        .authority()
        .parse()
        .map_err(|_| Refusal::bad_request("the target is not a valid authority"))?;
    Uri::builder()
        .scheme(scheme)
        .authority(authority)
        .path_and_query(
            path.cloned()
                .unwrap_or_else(|| PathAndQuery::from_static("/")),
        )
        .build()
        .map_err(|_| Refusal::bad_request("the request target is not a valid URI"))
}

fn refusal_event(refusal: &Refusal, target: &Target, method: &http::Method, uri: &Uri) -> Event {
    let kind = if refusal.status == http::StatusCode::FORBIDDEN
        || refusal.status == http::StatusCode::MISDIRECTED_REQUEST
    {
        EventKind::Deny
    } else {
        EventKind::Refuse
    };
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    Event::new(kind)
        .host(target.authority())
        .method(method.as_str())
        .path(path)
        .reason(refusal.code)
}
