//! The one TLS accept loop of the bench's upstreams (the measured upstream and the soak's
//! good listener): [`accept_tls`] takes each connection on a task of its own and serves it
//! with hyper, in whatever protocol ALPN chose.
//!
//! It listens only where it is handed a listener (always 127.0.0.1), and it answers
//! nothing itself: what is said is the service's. A connection that fails ends only itself.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body::Body;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

/// One accepted connection, its TLS handshake done.
pub(crate) type ServerTls = tokio_rustls::server::TlsStream<TcpStream>;

/// How long a client has to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// How long to wait before accepting again after an accept failed (out of descriptors,
/// say), so that the loop does not spin.
const ACCEPT_RETRY: Duration = Duration::from_millis(10);

/// Accepts connections on `listener` for as long as the task runs: each with Nagle off, its
/// handshake by `acceptor` bounded by [`HANDSHAKE_TIMEOUT`], then served with the service
/// `service_for` makes for it (it sees the handshake: SNI, ALPN), HTTP/2 for `h2` and
/// HTTP/1.1 (upgrades allowed: the upstream's `/ws`) otherwise.
pub(crate) async fn accept_tls<F, S, B>(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    service_for: F,
) where
    F: Fn(&ServerTls) -> S + Send + Sync + 'static,
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>, Error = Infallible>
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let service_for = Arc::new(service_for);
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            tokio::time::sleep(ACCEPT_RETRY).await;
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let service_for = service_for.clone();
        tokio::spawn(async move {
            let Ok(Ok(tls)) = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await
            else {
                return;
            };
            let service = service_for(&tls);
            // The connection's errors are the client's doing; it ends only itself.
            let is_h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
            let io = TokioIo::new(tls);
            if is_h2 {
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(io, service)
                    .await;
            } else {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .with_upgrades()
                    .await;
            }
        });
    }
}
