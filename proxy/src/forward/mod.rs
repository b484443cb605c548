//! One request, from the sandbox to the upstream and back, in the order the checks run.
//!
//! Two paths, each a list of steps with a line on why each is there:
//! [`intercepted`] serves a request inside a terminated TLS tunnel, [`plain`] an
//! absolute-form `http://` request (never swapped). Nothing is sent upstream before every
//! check of the request head has passed; a body is read whole first when it can be, so that
//! a refusal sends nothing at all. Every refusal a step returns is recorded and answered in
//! one place, [`Exchange::refuse`].
//!
//! The request body's policy lives in `request_body`, the approval step in `approval`, the
//! WebSocket upgrade in `upgrade`,
//! the budget charge in `crate::forward::budget` (the WebSocket relay charges it per message too),
//! and the response's redaction in `scan::response`.

mod approval;
pub(crate) mod budget;
mod metadata;
mod pin;
pub(crate) mod request_body;
mod token_endpoint;
pub(crate) mod tunnel;
mod upgrade;
pub(crate) mod websocket;

use std::sync::{Arc, PoisonError};

use http::header::{ACCEPT_ENCODING, HOST, HeaderName};
use http::request::Parts;
use http::uri::Scheme;
use http::{HeaderValue, Method, Request, Response, Uri, Version};
use hyper::body::Incoming;
use sluice_guard::{Guard, GuardError, Tally};
use sluice_policies::{Policy, Reach};

use crate::body::Body;
use crate::body::codec;
use crate::forward::tunnel::{Origin, Tunnel};
use crate::generation::door::Exchange;
use crate::generation::shared::Shared;
use crate::refusal::Refusal;
use crate::scan::headers;
use crate::scan::request::{Outbound, Place, Swapped};
use crate::scan::response;
use crate::signing;
use crate::tls::target::{self, Target, check_authority};
use crate::upstream::PinDemand;
use sluice_audit::{EventKind, SIGNATURE_LOCATION};

use request_body::{BodyStep, Buffering, StoppedBody};

/// The message codings a gRPC client accepts in responses.
const GRPC_ACCEPT_ENCODING: HeaderName = HeaderName::from_static("grpc-accept-encoding");

/// A request inside an intercepted tunnel.
pub(crate) async fn intercepted(
    request: Request<Incoming>,
    tunnel: &Tunnel,
    shared: &Arc<Shared>,
) -> Response<Body> {
    let arrived = std::time::Instant::now();
    let (parts, incoming) = request.into_parts();
    let exchange = Exchange::of_request(shared, tunnel.origin.authority(), &parts);
    let response = match intercepted_steps(parts, incoming, tunnel, shared, &exchange).await {
        Ok(response) => response,
        Err(refusal) => exchange.refuse(refusal),
    };
    shared.counters.request_took(arrived.elapsed());
    response
}

async fn intercepted_steps(
    mut parts: Parts,
    incoming: Incoming,
    tunnel: &Tunnel,
    shared: &Arc<Shared>,
    exchange: &Exchange,
) -> Result<Response<Body>, Refusal> {
    // Fail closed: without a working audit log, nothing is proxied.
    shared.audit_is_healthy()?;
    // RFC 8441: HTTP/2's WebSocket handshake (CONNECT with `:protocol websocket`) takes the
    // HTTP/1.1 one's shape first, so that every check below weighs both alike.
    let h2_websocket = upgrade::from_extended_connect(&mut parts)?;
    // A CONNECT inside a tunnel would ask the upstream for a tunnel nothing inspects.
    no_nested_connect(&parts)?;
    // Grants were decided for the tunnel's host: a request naming another goes nowhere.
    target::check(&parts.uri, &parts.headers, &tunnel.target)?;
    // Heads over the limit, and framing two parsers could read two ways, are refused.
    check_head(&parts, shared.limits.max_header_bytes)?;
    // A minted secret's token endpoint is sluice: the sandbox's own token requests are
    // answered with placeholders, never forwarded.
    if let Some(minter) = token_endpoint::minter_for(&shared.policy, &tunnel.target, &parts) {
        return token_endpoint::answer(parts, incoming, minter, shared, exchange).await;
    }
    // A minted secret granted toward this host has a token fit to send (minted now if need
    // be), and the request is scanned with a guard that knows it.
    let shared = &crate::generation::minted::ready(shared, &tunnel.target).await?;
    // A request signed with a signing secret's placeholders is checked as the client sent
    // it; its signature stays out of the scan until the request is signed again.
    let signing_cx = signing_context(shared);
    let stopped = StoppedBody::default();
    let (signing, incoming) = signing::verify(
        signing_cx,
        &tunnel.target,
        &mut parts,
        incoming,
        stopped.refusals(),
    )
    .await?;
    // An upgrade (WebSocket) is noted before its hop-by-hop headers go.
    let upgrade = match h2_websocket {
        true => Some(upgrade::Asked::Http2Connect),
        false => headers::upgrade_protocol(&parts.version, &parts.headers)
            .map(upgrade::Asked::Http1Upgrade),
    };
    // Hop-by-hop headers, the proxy's credentials among them, stop here.
    strip_hop_by_hop(&mut parts);
    // The head's scan: swap where granted, refuse everything else.
    // Request rules are weighed here, once, on the method and normalised path.
    let outbound = Outbound::new(&shared.guard, &shared.policy, &tunnel.target)
        .with_cache(&tunnel.plans)
        .for_request(&parts.method, parts.uri.path());
    let head = outbound.rewrite_head(&mut parts)?;
    let head_swaps: Vec<sluice_guard::SecretId> = head
        .iter()
        .flat_map(|swapped| budget::swapped(&swapped.tally))
        .collect();
    // The body: read whole when its length is known and within the bound, else streamed.
    // An upgrade's is always read whole before its handshake leaves: once the upstream
    // answers 101 the connection is joined, and a refusal could no longer stop it.
    let buffering = match upgrade {
        Some(_) => Buffering::Always,
        None => Buffering::WhenLengthKnown,
    };
    // A signed aws-chunked body's lengths are signed: its scan keeps or refuses, never swaps.
    let keep_length = signing.as_ref().is_some_and(signing::Pending::keeps_length);
    let (body, spending, body_report) = scan_body(
        &outbound,
        &mut parts,
        incoming,
        &stopped,
        (buffering, keep_length),
        shared,
        exchange,
    )
    .await?;
    // A pinned secret goes only over a connection whose verified chain holds its pins; an
    // upgrade's connection also carries every secret its frames may swap.
    let mut carried = head_swaps.clone();
    if upgrade.is_some() {
        carried.extend(upgrade::frames_may_swap(&shared.guard, &outbound));
    }
    let pins = pin::demand(shared, &carried, &spending.swaps);
    // A use that waits for a person (`approve:`) is held here: nothing of it is charged or
    // sent before its decision.
    let the_use = approval::Use {
        host: tunnel.origin.authority(),
        asked_path: exchange.sent_path(),
        head: &head_swaps,
        body: &spending.swaps,
        frames: &carried[head_swaps.len()..],
    };
    let body = approval::hold(shared, &parts, body, the_use).await?;
    // A budgeted secret's use is charged before anything of the request leaves.
    budget::charge(shared, &head_swaps, spending.swaps, &spending.pending)?;
    ask_for_scannable_codings(&mut parts.headers);
    // Signed again with the real key, over the request as it leaves.
    let body = match signing {
        Some(pending) => {
            let host = tunnel.origin.host_header();
            let (body, resigned) = pending.resign(signing_cx, &mut parts, body, &host).await?;
            exchange.record(
                exchange
                    .event(EventKind::Swap)
                    .secret(resigned.secret.as_str())
                    .location(SIGNATURE_LOCATION)
                    .count(1)
                    .reason(resigned.reason),
            );
            body
        }
        None => body,
    };
    // The checks that refuse a request for what it carries are done: its swaps are
    // recorded now, so that the log never says a value went out in a request refused after
    // its scan (a body, an approval, a budget, a signature). (The upstream's pins are
    // checked at its handshake, below: a request refused there is recorded as refused too.)
    record_swaps(&head, &body_report, exchange);
    // An upgrade (WebSocket) goes on a connection of its own, joined on 101.
    if let Some(asked) = upgrade {
        let pins = pins.as_ref();
        return upgrade::exchange(parts, body, asked, tunnel, pins, shared, exchange).await;
    }
    // Upstream, and the response redacted on its way back.
    let sent = Sent {
        outbound: &outbound,
        stopped: &stopped,
        pins: pins.as_ref(),
    };
    send(parts, body, &tunnel.origin, sent, shared, exchange).await
}

/// An absolute-form `http://` request: forwarded to a reachable host, never swapped.
pub(crate) async fn plain(request: Request<Incoming>, shared: Arc<Shared>) -> Response<Body> {
    let arrived = std::time::Instant::now();
    let response = plain_exchange(request, &shared).await;
    shared.counters.request_took(arrived.elapsed());
    response
}

async fn plain_exchange(request: Request<Incoming>, shared: &Arc<Shared>) -> Response<Body> {
    let (parts, incoming) = request.into_parts();
    // Google's metadata server, when the run has a Google secret, is sluice itself:
    // answered here with placeholders, never dialled.
    if let Some(minter) = metadata::minter_for(&shared.policy, &parts) {
        let raw = parts.uri.authority().map_or("", |a| a.as_str());
        let exchange = Exchange::of_request(shared, raw, &parts);
        return match metadata::answer(&parts, minter, shared, &exchange).await {
            Ok(response) => response,
            Err(refusal) => exchange.refuse(refusal),
        };
    }
    // The target: an `http://` URI naming a reachable host.
    let target = match plain_target(&parts, &shared.guard, &shared.policy) {
        Ok(target) => target,
        Err(refusal) => {
            // Logged with the host as sent: the audit log's redactor sees it exactly.
            let raw = parts.uri.authority().map_or("", |a| a.as_str());
            return Exchange::of_request(shared, raw, &parts).refuse(refusal);
        }
    };
    let exchange = Exchange::of_request(shared, &target.authority(), &parts);
    match plain_steps(parts, incoming, &target, shared, &exchange).await {
        Ok(response) => response,
        Err(refusal) => exchange.refuse(refusal),
    }
}

async fn plain_steps(
    mut parts: Parts,
    incoming: Incoming,
    target: &Target,
    shared: &Arc<Shared>,
    exchange: &Exchange,
) -> Result<Response<Body>, Refusal> {
    // (The listener has checked the audit log and the head's size for this request.)
    // A `Host` header, when sent, must name the target the egress decision was made for.
    if parts.headers.contains_key(HOST) {
        target::check(&Uri::from_static("/"), &parts.headers, target)?;
    }
    // Framing two parsers could read two ways is refused, never repaired.
    headers::check_framing(&parts.headers)?;
    // Hop-by-hop headers, the proxy's credentials among them, stop here; no upgrade in the
    // clear, so its headers go too.
    strip_hop_by_hop(&mut parts);
    // The head's scan: plain HTTP is never swapped, so a placeholder in it is refused.
    let outbound = Outbound::plain(&shared.guard, &shared.policy, target);
    let head = outbound.rewrite_head(&mut parts)?;
    // The body: read whole when its length is known and within the bound, else streamed.
    let stopped = StoppedBody::default();
    let buffering = Buffering::WhenLengthKnown;
    let incoming = signing::RequestBody::Arriving(incoming);
    // Nothing is swapped into plain HTTP, so no budget is spent.
    let (body, _, body_report) = scan_body(
        &outbound,
        &mut parts,
        incoming,
        &stopped,
        (buffering, false),
        shared,
        exchange,
    )
    .await?;
    record_swaps(&head, &body_report, exchange);
    ask_for_scannable_codings(&mut parts.headers);
    // Upstream, and the response redacted on its way back.
    let origin = Origin::new(target, Scheme::HTTP)?;
    let sent = Sent {
        outbound: &outbound,
        stopped: &stopped,
        pins: None,
    };
    send(parts, body, &origin, sent, shared, exchange).await
}

/// The target of a plain request: an `http://` URI naming a reachable host.
fn plain_target(parts: &Parts, guard: &Guard, policy: &Policy) -> Result<Target, Refusal> {
    if parts.uri.scheme() != Some(&Scheme::HTTP) {
        return Err(Refusal::bad_request(
            "only http:// targets may be proxied in the clear; use CONNECT for https",
        ));
    }
    let authority = parts
        .uri
        .authority()
        .ok_or_else(|| Refusal::bad_request("the request target has no host"))?;
    // A secret in the host name would leave with the first DNS lookup.
    check_authority(guard, authority.as_str())?;
    let target = Target::parse(authority, Some(80))?;
    // The egress decision, as for a tunnel.
    if let Reach::Denied(denied) = policy.reach(&target.host, target.port) {
        return Err(Refusal::host_not_allowed(
            &target.host,
            target.port,
            &denied.to_string(),
        ));
    }
    Ok(target)
}

fn no_nested_connect(parts: &Parts) -> Result<(), Refusal> {
    if parts.method == Method::CONNECT {
        return Err(Refusal::bad_request(
            "CONNECT inside an intercepted tunnel is not allowed; send CONNECT to sluice itself",
        ));
    }
    Ok(())
}

/// The head's size, exactly (hyper bounds its buffer, which usually stops such a head
/// first), and its framing.
fn check_head(parts: &Parts, max_header_bytes: usize) -> Result<(), Refusal> {
    headers::check_head_size(&parts.uri, &parts.headers, max_header_bytes)?;
    headers::check_framing(&parts.headers)
}

/// Removes the hop-by-hop headers, and `Host`, which is written again for the upstream.
fn strip_hop_by_hop(parts: &mut Parts) {
    headers::remove_hop_by_hop(&mut parts.headers);
    parts.headers.remove(HOST);
}

/// Records what the head's scan swapped (and, toward a verbatim host, kept), place by place.
fn record_swaps(head: &[Swapped], body: &HeldReport, exchange: &Exchange) {
    for swapped in head {
        let location = swapped.place.label();
        exchange.record_tally(&location, &swapped.tally);
        // Values replaced by their placeholders toward a verbatim host.
        exchange.record_redactions(&location, &swapped.tally);
    }
    body.release();
}

/// The body's report, held until [`record_swaps`]: a body read whole is scanned (and
/// reports) before the approval, the budget and the signature, any of which may still
/// refuse the request; dropped unreleased, what it swapped is never recorded as sent. A
/// body that streams reports as it ends, after its request has gone, and a report that
/// carries a cut (a refusal mid-body) is never held.
#[derive(Clone, Default)]
struct HeldReport(Arc<std::sync::Mutex<Held>>);

#[derive(Default)]
struct Held {
    released: bool,
    waiting: Option<Box<dyn FnOnce() + Send>>,
}

impl HeldReport {
    /// `report`, run at once once released (or when it carries a cut), else kept.
    fn hold<R>(&self, report: R) -> impl FnOnce(&Tally, Option<Refusal>, u64) + Send + 'static
    where
        R: FnOnce(&Tally, Option<Refusal>, u64) + Send + 'static,
    {
        let slot = self.0.clone();
        move |tally: &Tally, cut: Option<Refusal>, scanned: u64| {
            let mut held = slot.lock().unwrap_or_else(PoisonError::into_inner);
            if held.released || cut.is_some() {
                drop(held);
                report(tally, cut, scanned);
            } else {
                let tally = tally.clone();
                held.waiting = Some(Box::new(move || report(&tally, None, scanned)));
            }
        }
    }

    /// Runs the report kept, if any; from now on a report runs at once.
    fn release(&self) {
        let waiting = {
            let mut held = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            held.released = true;
            held.waiting.take()
        };
        if let Some(report) = waiting {
            report();
        }
    }
}

/// What the signing step reads of this proxy.
fn signing_context(shared: &Shared) -> signing::Context<'_> {
    signing::Context {
        signers: &shared.signers,
        policy: &shared.policy,
        limits: &shared.limits,
    }
}

/// What the body step leaves for the budget step: what the body swapped or may swap, and
/// where a streamed body's charge waits for it to end.
struct Spending {
    swaps: budget::BodySwaps,
    pending: budget::Pending,
}

/// The body step (`request_body`), with this proxy's guard and bounds; its tally is
/// recorded once the report is released ([`record_swaps`]).
async fn scan_body(
    outbound: &Outbound<'_>,
    parts: &mut Parts,
    incoming: signing::RequestBody,
    stopped: &StoppedBody,
    (buffering, keep_length): (Buffering, bool),
    shared: &Shared,
    exchange: &Exchange,
) -> Result<(Body, Spending, HeldReport), Refusal> {
    let step = BodyStep {
        outbound,
        guard: &shared.guard,
        limits: &shared.limits,
        buffering,
        keep_length,
    };
    let pending = budget::Pending::default();
    let held = HeldReport::default();
    let report = held.hold(pending.settling(shared.guard.clone(), exchange.reporter("body")));
    let (body, swaps) = request_body::scan(step, parts, incoming, stopped, report).await?;
    Ok((body, Spending { swaps, pending }, held))
}

/// What the sending step needs to know of the scan: its plans, whether it stopped the
/// body (a stopped body is the refusal it is, not an upstream failure), and the pins of
/// the pinned secrets it carries.
#[derive(Clone, Copy)]
struct Sent<'a> {
    outbound: &'a Outbound<'a>,
    stopped: &'a StoppedBody,
    pins: Option<&'a PinDemand>,
}

/// Asks for answers sluice can scan: in a coding it can decode (a client's list that names
/// only such codings goes as it came), and gRPC messages uncompressed, since sluice does
/// not undo gRPC's message codings. Before a request is signed again, so that a signature
/// covering these headers covers what leaves.
fn ask_for_scannable_codings(headers: &mut http::HeaderMap) {
    let asked = headers.get_all(ACCEPT_ENCODING);
    if !asked.iter().all(codec::names_only_decodable) {
        headers.insert(ACCEPT_ENCODING, codec::accept_encoding());
    }
    if headers.contains_key(GRPC_ACCEPT_ENCODING) {
        headers.insert(GRPC_ACCEPT_ENCODING, HeaderValue::from_static("identity"));
    }
}

/// Sends the scanned request to `origin` and redacts the response on its way back.
async fn send(
    mut parts: Parts,
    body: Body,
    origin: &Origin,
    sent: Sent<'_>,
    shared: &Arc<Shared>,
    exchange: &Exchange,
) -> Result<Response<Body>, Refusal> {
    parts.headers.insert(HOST, origin.host_header());
    parts.uri = origin.uri(parts.uri.path_and_query())?;
    let downstream_version = parts.version;
    parts.version = Version::HTTP_11;
    let is_head = parts.method == Method::HEAD;
    let response = match shared
        .upstream
        .send(
            Request::from_parts(parts, body),
            downstream_version,
            sent.pins,
        )
        .await
    {
        Ok(response) => response,
        Err(error) => {
            // A body sluice stopped is the refusal it is, not an upstream failure.
            let refusal = match sent.stopped.take() {
                Some(refused) => {
                    let refused = GuardError::Refused(refused.refusal);
                    sent.outbound.refusal(refused, &Place::Body)
                }
                None => match sent.stopped.take_refusal() {
                    Some(refusal) => refusal,
                    None => {
                        Refusal::from_send(&error, shared.upstream.timeouts(), origin.authority())
                    }
                },
            };
            // A body sluice cut was recorded by its own report, as it was cut.
            return Err(if sent.stopped.was_cut() {
                refusal.audited()
            } else {
                refusal
            });
        }
    };
    response::redact(response, is_head, shared, exchange).await
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn parts(request: http::request::Builder) -> Parts {
        request.body(()).unwrap().into_parts().0
    }

    #[test]
    fn a_connect_inside_a_tunnel_is_refused_and_other_methods_pass() {
        let connect = parts(
            Request::builder()
                .method(Method::CONNECT)
                .uri("other.test:443"),
        );
        assert_eq!(no_nested_connect(&connect).unwrap_err().code, "bad-request");
        for method in [Method::GET, Method::POST, Method::OPTIONS] {
            assert!(no_nested_connect(&parts(Request::builder().method(method).uri("/"))).is_ok());
        }
    }

    #[test]
    fn a_head_over_the_limit_or_framed_two_ways_is_refused() {
        let big = parts(Request::builder().uri("/").header("x-big", "a".repeat(100)));
        assert!(check_head(&big, 1000).is_ok());
        assert_eq!(
            check_head(&big, 50).unwrap_err().code,
            "request-head-too-large"
        );
        let both = parts(
            Request::builder()
                .uri("/")
                .header("content-length", "3")
                .header("transfer-encoding", "chunked"),
        );
        assert_eq!(check_head(&both, 1000).unwrap_err().code, "bad-request");
    }

    #[test]
    fn hop_by_hop_headers_and_host_stop_here() {
        let mut p = parts(
            Request::builder()
                .uri("/")
                .header("host", "api.test")
                .header("proxy-authorization", "Basic eA==")
                .header("connection", "x-hop")
                .header("x-hop", "1")
                .header("authorization", "Bearer t"),
        );
        strip_hop_by_hop(&mut p);
        assert_eq!(p.headers.len(), 1, "{:?}", p.headers);
        assert_eq!(
            p.headers["authorization"],
            HeaderValue::from_static("Bearer t")
        );
    }

    #[test]
    fn a_plain_target_is_an_http_uri_naming_a_reachable_host_without_a_secret() {
        let yaml = r#"
version: 1
secrets:
  tok:
    value: "Tok-Value-0001"
    hosts: ["api.test"]
egress:
  allow: ["open.test"]
"#;
        let (policy, guard) = crate::testing::declared(yaml, "plain.yaml");
        let target = |uri: &str| plain_target(&parts(Request::builder().uri(uri)), &guard, &policy);
        let open = target("http://OPEN.test/x").unwrap();
        assert_eq!((open.host.as_str(), open.port), ("open.test", 80));
        assert_eq!(target("http://api.test:8080/").unwrap().port, 8080);
        let cases = [
            ("https://open.test/", "bad-request"),
            ("http://closed.test/", "host-not-allowed"),
            ("http://Tok-Value-0001.open.test/", "secret-value-refused"),
            // Host names are case-insensitive: so is the search for a value in one.
            ("http://tok-value-0001.open.test/", "secret-value-refused"),
        ];
        for (uri, code) in cases {
            assert_eq!(target(uri).unwrap_err().code, code, "{uri}");
        }
    }
}
