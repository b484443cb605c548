//! Transparent capture: connections the jail redirected to sluice without the workload
//! asking (nftables `redirect` inside the jail's network namespace), each taken back to
//! the name it was for and then served exactly as a CONNECT to that name would be: the
//! egress decision, interception with the run CA (the TLS SNI must name the target),
//! passthrough, every refusal audited.
//!
//! The name comes from the address the jail's resolver ([`dns`]) handed out for it
//! ([`names::Names`]), read back from the connection's original destination
//! (`SO_ORIGINAL_DST`). A connection to an address sluice never handed out has no name it
//! can be decided on: it is refused and audited (`deny`). It must never dial the original
//! destination as given.

pub(crate) mod dns;
pub(crate) mod names;

use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;

use sluice_policies::Reach;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::audit::EventKind;
use crate::authority::Target;
use crate::exchange::Exchange;
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
    let Some(host) = names.name_of(destination.ip()) else {
        // An address the resolver never gave out (a literal IP in the workload): there is
        // no name to decide on, and the address itself is never dialled.
        let exchange = Exchange::new(&shared, "CONNECT").host(destination.to_string());
        exchange.record(
            exchange
                .event(EventKind::Deny)
                .reason("transparent: address not resolved through sluice"),
        );
        return;
    };
    let target = Target {
        host,
        port: destination.port(),
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
