//! The one TLS accept loop of every test upstream: [`TlsListener`] binds 127.0.0.1, completes
//! each handshake on a task of its own and hands the connection to the upstream's code; and
//! [`serve_by_alpn`], hyper on that connection in whatever protocol ALPN chose.
//!
//! It never binds beyond loopback, and it never answers anything itself: what is said on a
//! connection is the upstream's own (hyper through a service, or raw bytes). A failed
//! handshake ends only that connection.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

/// One accepted connection, its TLS handshake done.
pub type ServerTls = tokio_rustls::server::TlsStream<TcpStream>;

/// A listener on 127.0.0.1 accepting TLS until the test's runtime ends.
pub struct TlsListener {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
}

impl TlsListener {
    /// Binds 127.0.0.1 on a free port and, for each TCP connection, completes a TLS
    /// handshake with `config` and runs `serve(tls, number)` on a task of its own. `number`
    /// counts the TCP connections from 1, in the order they were accepted.
    pub async fn start<F, Fut>(config: Arc<rustls::ServerConfig>, serve: F) -> Self
    where
        F: Fn(ServerTls, usize) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind upstream");
        let addr = listener.local_addr().expect("upstream addr");
        let accepted = Arc::new(AtomicUsize::new(0));
        let acceptor = TlsAcceptor::from(config);
        let serve = Arc::new(serve);
        let task_accepted = accepted.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let number = task_accepted.fetch_add(1, Ordering::SeqCst) + 1;
                let acceptor = acceptor.clone();
                let serve = serve.clone();
                tokio::spawn(async move {
                    if let Ok(tls) = acceptor.accept(tcp).await {
                        serve(tls, number).await;
                    }
                });
            }
        });
        Self { addr, accepted }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// TCP connections accepted so far (handshakes completed or not).
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

/// Serves `tls` with `service` in what ALPN chose: HTTP/2 for `h2`, HTTP/1.1 (upgrades
/// allowed) otherwise. Ends when the connection does; its errors are the client's doing,
/// and the test looks at what arrived instead.
pub async fn serve_by_alpn<S, B>(tls: ServerTls, service: S)
where
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>, Error = Infallible>
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
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
}
