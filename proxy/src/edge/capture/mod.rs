//! Transparent capture: connections the jail redirected to sluice without the workload
//! asking (nftables `redirect` inside the jail's network namespace), each taken back to
//! the name it was for and then served exactly as a CONNECT to that name would be: the
//! egress decision, interception with the run CA (the TLS SNI must name the target),
//! passthrough, every refusal audited.
//!
//! The name comes from the address the jail's resolver ([`dns`]) handed out for it
//! ([`names::Names`]), read back from the connection's original destination
//! (`SO_ORIGINAL_DST`); for any other address, from the TLS server name its ClientHello
//! asks for ([`sni`]), as a CONNECT would name it. A connection in the clear is served as
//! plain HTTP ([`plain`]): each request's target the mapped name or its `Host`. A TLS
//! connection with neither name has nothing to be decided on: it is refused and audited
//! (`deny`). It must never dial the
//! original destination as given: sluice resolves the name itself.

pub(crate) mod denials;
pub(crate) mod dns;
pub(crate) mod names;
mod plain;
mod sni;

use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;

use sluice_policies::{Denied, Reach, normalize_host};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::generation::door::Exchange;
use crate::generation::shared::{ConnSlot, Shared};
use crate::refusal::Refusal;
use crate::tls::target::{Target, check_authority};
use names::Names;
use sni::Hello;

/// Accepts redirected connections until `shutdown`, as the proxy's listener accepts.
pub(crate) async fn serve(
    listener: TcpListener,
    names: Arc<Names>,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
) {
    crate::edge::listen::accept(
        listener,
        shared,
        shutdown,
        "transparent",
        move |stream, slot, shared| {
            let names = names.clone();
            async move { serve_captured(stream, &names, shared, slot).await }
        },
    )
    .await;
}

/// One captured connection: its name, the egress decision, then the CONNECT path.
async fn serve_captured(stream: TcpStream, names: &Names, shared: Arc<Shared>, slot: ConnSlot) {
    let _ = stream.set_nodelay(true);
    let Some(destination) = original_destination(&stream) else {
        Exchange::new(&shared, "CONNECT").record_refusal(&Refusal::no_target(
            "transparent: the connection has no original destination",
        ));
        return;
    };
    let mapped = names.name_of(destination.ip());
    let hello = sni::client_hello(&stream, shared.limits.tls_handshake_timeout).await;
    let host = match (mapped, hello) {
        // In the clear: each request's target is the mapped name, or its `Host`.
        (mapped, Hello::NotTls) => {
            plain::serve(stream, mapped, destination.port(), shared, slot).await;
            return;
        }
        // The handshake's own checks (the SNI must name it) decide the rest.
        (Some(host), _) => host,
        (None, Hello::Named(sni)) => match server_name(&sni, destination, &shared) {
            Some(host) => host,
            None => return,
        },
        (None, Hello::Unnamed | Hello::Silent | Hello::Partial) => {
            // A literal IP with no TLS server name: nothing to decide on.
            Exchange::new(&shared, "CONNECT")
                .host(destination.to_string())
                .record_refusal(&Refusal::no_target(
                    "transparent: address not resolved through sluice and no TLS server name",
                ));
            return;
        }
    };
    let target = Target {
        host,
        port: destination.port(),
    };
    let exchange = Exchange::new(&shared, "CONNECT").host(target.authority());
    let reach = match shared.policy.reach(&target.host, target.port) {
        // A host that waits for a person's decision (`egress.ask`), as for a CONNECT.
        Reach::Denied(Denied::NotAllowed { .. })
            if shared.policy.asks(&target.host, target.port) =>
        {
            match crate::edge::ask::hold(&shared, &target).await {
                Ok(()) => Reach::Intercept,
                Err(refusal) => return exchange.record_refusal(&refusal),
            }
        }
        reach => reach,
    };
    match reach {
        // The same refusal a CONNECT gets; no response can carry it here.
        Reach::Denied(denied) => exchange.record_refusal(&Refusal::host_not_allowed(
            &target.host,
            target.port,
            &denied.to_string(),
        )),
        Reach::Passthrough => {
            crate::edge::connect::tunnel_passthrough(stream, target, shared, slot, exchange).await;
        }
        Reach::Intercept => {
            crate::edge::connect::intercept(stream, target, shared, slot, exchange).await;
        }
    }
}

/// The host a TLS server name names, as a CONNECT target would be checked: a name holding
/// a secret goes no further (the event holds it redacted), and the name is normalised as
/// every host is. `None` when refused (and audited).
fn server_name(sni: &str, destination: SocketAddr, shared: &Arc<Shared>) -> Option<String> {
    let authority = format!("{sni}:{}", destination.port());
    if let Err(refusal) = check_authority(&shared.guard, &authority) {
        Exchange::new(shared, "CONNECT")
            .host(authority)
            .record_refusal(&refusal);
        return None;
    }
    match normalize_host(sni) {
        Ok(host) => Some(host),
        Err(_) => {
            Exchange::new(shared, "CONNECT")
                .host(authority)
                .record_refusal(&Refusal::no_target(
                    "transparent: the TLS server name is not a host name",
                ));
            None
        }
    }
}

/// Where the workload meant to connect, before the jail's redirect (IPv4 and IPv6).
fn original_destination(stream: &TcpStream) -> Option<SocketAddr> {
    use nix::sys::socket::{getsockopt, sockopt};
    match stream.local_addr().ok()?.ip() {
        IpAddr::V4(_) => {
            let raw = getsockopt(stream, sockopt::OriginalDst).ok()?;
            let ip = Ipv4Addr::from(u32::from_be(raw.sin_addr.s_addr));
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(raw.sin_port),
            )))
        }
        IpAddr::V6(_) => {
            let raw = getsockopt(stream, sockopt::Ip6tOriginalDst).ok()?;
            let ip = std::net::Ipv6Addr::from(raw.sin6_addr.s6_addr);
            Some(SocketAddr::new(IpAddr::V6(ip), u16::from_be(raw.sin6_port)))
        }
    }
}
