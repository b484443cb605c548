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
use tokio::io::Interest;
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
            // A client that gives up stops waiting, and its use leaves the approvers'
            // list, as a CONNECT's does when its client hangs up.
            let decided = tokio::select! {
                decided = crate::edge::ask::hold(&shared, &target) => decided,
                () = client_left(&stream) => return,
            };
            match decided {
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

/// Resolves once the client has closed its side of `stream` (or it failed). Nothing is
/// read: the bytes waiting (a ClientHello) are the handshake's.
///
/// It watches a second handle on the socket, registered on its own: spending that
/// handle's readiness (to wait for news rather than spin on bytes already there) leaves
/// `stream`'s untouched, which the handshake needs to read what is waiting. Without a
/// second handle (no descriptor to be had) it never resolves: the wait goes on as before.
async fn client_left(stream: &TcpStream) {
    use std::os::fd::AsFd;
    let watch = stream
        .as_fd()
        .try_clone_to_owned()
        .map(std::net::TcpStream::from)
        .and_then(TcpStream::from_std);
    let Ok(watch) = watch else {
        return std::future::pending().await;
    };
    loop {
        let Ok(ready) = watch.ready(Interest::READABLE).await else {
            return;
        };
        if ready.is_read_closed() || ready.is_error() {
            return;
        }
        // Readable only because of bytes already there: forget that readiness (this
        // handle's alone), so that the next wait is for news, more bytes or the close.
        let _ = watch.try_io(Interest::READABLE, || {
            Err::<(), _>(std::io::ErrorKind::WouldBlock.into())
        });
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::AsyncWriteExt;

    use super::*;

    /// A client that sent its hello and waits is still there, and its hello can still be
    /// read (watching it must not spend the stream's own readiness: a handshake after a
    /// decision would wait for ever); one that closes is gone.
    #[tokio::test]
    async fn a_client_that_closes_is_noticed_one_that_waits_is_not() {
        use tokio::io::AsyncReadExt;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (mut server, _) = listener.accept().await.unwrap();
        client.write_all(b"a client hello").await.unwrap();
        let waiting = tokio::time::timeout(Duration::from_millis(300), client_left(&server));
        assert!(
            waiting.await.is_err(),
            "a waiting client was taken for gone"
        );
        // Decided: the handshake reads what waits, the client still connected.
        let mut hello = [0u8; 14];
        tokio::time::timeout(Duration::from_secs(2), server.read_exact(&mut hello))
            .await
            .expect("the hello is read after the watch")
            .unwrap();
        assert_eq!(&hello, b"a client hello");
        client.shutdown().await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), client_left(&server))
            .await
            .expect("a closed client is noticed");
    }
}
