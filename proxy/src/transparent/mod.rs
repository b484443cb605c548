//! Transparent capture: connections the jail redirected to sluice without the workload
//! asking (nftables `redirect` inside the jail's network namespace), each taken back to
//! the name it was for and then served exactly as a CONNECT to that name would be: the
//! egress decision, interception with the run CA (the TLS SNI must name the target),
//! passthrough, every refusal audited.
//!
//! The name comes from the address the jail's resolver ([`dns`]) handed out for it
//! ([`names::Names`]), read back from the connection's original destination
//! (`SO_ORIGINAL_DST`); for any other address, from the TLS server name its ClientHello
//! asks for ([`sni`]), as a CONNECT would name it. A connection with neither has no name
//! it can be decided on: it is refused and audited (`deny`). It must never dial the
//! original destination as given: sluice resolves the name itself.

pub(crate) mod dns;
pub(crate) mod names;
mod sni;

use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;

use sluice_policies::{Reach, normalize_host};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::audit::EventKind;
use crate::authority::Target;
use crate::exchange::Exchange;
use crate::rewrite::request::check_authority;
use crate::shared::{ConnSlot, Shared, until_stopped};
use names::Names;

/// Accepts redirected connections until `shutdown`.
pub(crate) async fn serve(
    listener: TcpListener,
    names: Arc<Names>,
    shared: Arc<Shared>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            () = until_stopped(&mut shutdown) => return,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                tracing::warn!(%error, "accept failed (transparent)");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = shared.connections.clone().try_acquire_owned() else {
            tracing::warn!(
                limit = shared.limits.max_connections,
                "connection limit reached; closing"
            );
            continue;
        };
        let (names, shared) = (names.clone(), shared.clone());
        tokio::spawn(async move {
            serve_captured(stream, &names, shared, Arc::new(permit)).await;
        });
    }
}

/// One captured connection: its name, the egress decision, then the CONNECT path.
async fn serve_captured(stream: TcpStream, names: &Names, shared: Arc<Shared>, slot: ConnSlot) {
    let _ = stream.set_nodelay(true);
    let Some(destination) = original_destination(&stream) else {
        let exchange = Exchange::new(&shared, "CONNECT");
        exchange.record(
            exchange
                .event(EventKind::Deny)
                .reason("transparent: no original destination"),
        );
        return;
    };
    let Some(target) = name(&stream, destination, names, &shared).await else {
        return;
    };
    let exchange = Exchange::new(&shared, "CONNECT").host(target.authority());
    match shared.policy.reach(&target.host, target.port) {
        Reach::Denied(denied) => {
            exchange.record(
                exchange
                    .event(EventKind::Deny)
                    .reason(format!("host-not-allowed: {denied}")),
            );
        }
        Reach::Passthrough => {
            crate::connect::tunnel_passthrough(stream, target, shared, slot, exchange).await;
        }
        Reach::Intercept => {
            crate::connect::intercept(stream, target, shared, slot, exchange).await;
        }
    }
}

/// The name a captured connection is for: the one the jail's resolver handed its address
/// out for, else the server name of its TLS ClientHello. A name that holds a secret, or no
/// name at all, is refused and audited (`None`); the address itself is never dialled.
async fn name(
    stream: &TcpStream,
    destination: SocketAddr,
    names: &Names,
    shared: &Arc<Shared>,
) -> Option<Target> {
    if let Some(host) = names.name_of(destination.ip()) {
        return Some(Target {
            host,
            port: destination.port(),
        });
    }
    let deny = |host: String, reason: &str| {
        let exchange = Exchange::new(shared, "CONNECT").host(host);
        exchange.record(exchange.event(EventKind::Deny).reason(reason));
    };
    let Some(sni) = sni::server_name(stream, shared.limits.tls_handshake_timeout).await else {
        // A literal IP with no TLS server name (a raw socket, plain HTTP): nothing to
        // decide on.
        deny(
            destination.to_string(),
            "transparent: address not resolved through sluice and no TLS server name",
        );
        return None;
    };
    // As a CONNECT target would be: a name holding a secret goes no further (the event
    // holds it redacted), and the name is normalised as every host is.
    let authority = format!("{sni}:{}", destination.port());
    if let Err(refusal) = check_authority(&shared.guard, &authority) {
        Exchange::new(shared, "CONNECT")
            .host(authority)
            .record_refusal(&refusal);
        return None;
    }
    match normalize_host(&sni) {
        Ok(host) => Some(Target {
            host,
            port: destination.port(),
        }),
        Err(_) => {
            deny(
                authority,
                "transparent: the TLS server name is not a host name",
            );
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
