//! Dialling an upstream: resolve and check the address, connect with a timeout and
//! `TCP_NODELAY`, then TLS with certificate verification and the ALPN offer of the pool
//! the connection is for (`h2` and `http/1.1`, or `http/1.1` alone).
//!
//! Every new upstream connection, and only a new one, passes through here: the HTTP/1.1
//! pool (`pool.rs`) calls it, and hyper-util's pooled client (the HTTP/2 leg) through the
//! [`Connector`].

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

/// The most TLS bytes an upstream connection buffers before they are written: 256 KiB.
const UPSTREAM_TLS_BUFFER: usize = 256 * 1024;

use super::{Dialer, UpstreamError};

/// The connector handed to hyper-util's pooled client.
#[derive(Clone)]
pub(crate) struct Connector {
    pub(super) dialer: Arc<Dialer>,
    /// The TLS configuration, and with it the ALPN offer, of this connector's pool.
    pub(super) tls: Arc<rustls::ClientConfig>,
}

impl tower_service::Service<Uri> for Connector {
    type Response = UpstreamConn;
    type Error = UpstreamError;
    type Future = Pin<Box<dyn Future<Output = Result<UpstreamConn, UpstreamError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let dialer = self.dialer.clone();
        let tls = self.tls.clone();
        Box::pin(async move { dialer.connect_uri(&uri, tls).await })
    }
}

impl Dialer {
    pub(super) async fn connect_uri(
        &self,
        uri: &Uri,
        tls_config: Arc<rustls::ClientConfig>,
    ) -> Result<UpstreamConn, UpstreamError> {
        let host = uri
            .host()
            .ok_or_else(|| UpstreamError::BadTarget(uri.to_string()))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let tls = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(UpstreamError::BadTarget(uri.to_string())),
        };
        let port = uri.port_u16().unwrap_or(if tls { 443 } else { 80 });
        if !tls {
            // Plain HTTP through the egress proxy is a connection to the proxy itself, its
            // requests in absolute form (the pool writes them so).
            let tcp = match self.proxy_for_plain(&host, port) {
                Some(via) => {
                    self.check_known(&host, port)?;
                    self.dial_proxy(via).await?
                }
                None => self.dial(&host, port).await?,
            };
            return Ok(UpstreamConn::Plain(TokioIo::new(tcp)));
        }
        self.connect_tls(&host, port, tls_config).await
    }

    /// Dials `host:port` and completes a verified TLS handshake with `config`.
    pub(crate) async fn connect_tls(
        &self,
        host: &str,
        port: u16,
        config: std::sync::Arc<rustls::ClientConfig>,
    ) -> Result<UpstreamConn, UpstreamError> {
        let tcp = self.dial(host, port).await?;
        let name = ServerName::try_from(host.to_owned())
            .map_err(|_| UpstreamError::BadTarget(host.to_owned()))?;
        let handshake = TlsConnector::from(config).connect(name, tcp);
        let stream = tokio::time::timeout(self.common.timeouts.tls, handshake)
            .await
            .map_err(|_| UpstreamError::TlsTimeout {
                host: host.to_owned(),
            })?
            .map_err(
                |source| match super::pinned::PinMismatch::in_handshake(&source) {
                    Some(mismatch) => UpstreamError::PinMismatch {
                        host: host.to_owned(),
                        secrets: mismatch.secrets.clone(),
                    },
                    None => UpstreamError::Tls {
                        host: host.to_owned(),
                        source,
                    },
                },
            )?;
        let mut stream = stream;
        // rustls takes at most 64 KiB of plaintext per write by default: a 64 KiB aws-chunk
        // and its size line would go out as two writes, and two wake-ups of each side. The
        // bound is hyper's own write buffer's order; what is buffered is sent at once.
        stream
            .get_mut()
            .1
            .set_buffer_limit(Some(UPSTREAM_TLS_BUFFER));
        Ok(UpstreamConn::Tls(Box::new(TokioIo::new(stream))))
    }

    /// Resolves, checks and dials `host:port`, trying each checked address in turn; through
    /// the egress proxy when there is one and `host` is not in its `NO_PROXY` (the address
    /// resolved and checked is then the proxy's, and the stream is the tunnel it opened).
    pub(crate) async fn dial(&self, host: &str, port: u16) -> Result<TcpStream, UpstreamError> {
        if let Some(via) = &self.common.via
            && !via.bypasses(host, port)
        {
            self.check_known(host, port)?;
            let stream = self.dial_proxy(via).await?;
            return via
                .tunnel(stream, host, port, self.common.timeouts.connect)
                .await;
        }
        self.dial_direct(host, port).await
    }

    /// Through the egress proxy, the address policy still holds for an address sluice can
    /// see: an IP literal or a pinned name.
    fn check_known(&self, host: &str, port: u16) -> Result<(), UpstreamError> {
        self.common.resolver.check_known(
            host,
            port,
            self.allow_ips.as_ref(),
            &self.common.own_listeners,
        )
    }

    /// The egress proxy a plain-HTTP request to `host:port` goes through, if any.
    pub(super) fn proxy_for_plain(
        &self,
        host: &str,
        port: u16,
    ) -> Option<&super::via::UpstreamProxy> {
        self.common
            .via
            .as_deref()
            .filter(|via| !via.bypasses(host, port))
    }

    /// A TCP connection to the egress proxy itself, under the address policy.
    async fn dial_proxy(
        &self,
        via: &super::via::UpstreamProxy,
    ) -> Result<TcpStream, UpstreamError> {
        let (proxy_host, proxy_port) = via.address();
        self.dial_direct(proxy_host, proxy_port)
            .await
            .map_err(|error| match error {
                // Refused by the address policy: said as it is, naming the proxy's address.
                blocked @ UpstreamError::Blocked { .. } => blocked,
                other => UpstreamError::ProxyUnreachable {
                    proxy: format!("{proxy_host}:{proxy_port}"),
                    why: other.to_string(),
                },
            })
    }

    /// Resolves, checks and dials `host:port` itself.
    async fn dial_direct(&self, host: &str, port: u16) -> Result<TcpStream, UpstreamError> {
        let addrs = self
            .common
            .resolver
            .resolve(
                host,
                port,
                self.allow_ips.as_ref(),
                &self.common.own_listeners,
            )
            .await?;
        let mut last = None;
        for addr in addrs {
            match self.dial_addr(addr).await {
                Ok(stream) => return Ok(stream),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| UpstreamError::BadTarget(host.to_owned())))
    }

    async fn dial_addr(&self, addr: SocketAddr) -> Result<TcpStream, UpstreamError> {
        self.common
            .dials
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let stream = tokio::time::timeout(self.common.timeouts.connect, TcpStream::connect(addr))
            .await
            .map_err(|_| UpstreamError::ConnectTimeout { addr })?
            .map_err(|source| UpstreamError::Connect { addr, source })?;
        // Small writes (headers, TLS records) must not wait for Nagle's delayed ACK.
        stream
            .set_nodelay(true)
            .map_err(|source| UpstreamError::Connect { addr, source })?;
        Ok(stream)
    }
}

/// A connection to an upstream, plain or TLS.
pub(crate) enum UpstreamConn {
    /// Plain HTTP (absolute-form requests from the sandbox; never swapped).
    Plain(TokioIo<TcpStream>),
    /// TLS, verified. Boxed: a TLS session is a kilobyte of state, a plain socket is not.
    Tls(Box<TokioIo<TlsStream<TcpStream>>>),
}

impl Connection for UpstreamConn {
    fn connected(&self) -> Connected {
        match self {
            Self::Plain(_) => Connected::new(),
            Self::Tls(io) => {
                let (_, session) = io.inner().get_ref();
                if session.alpn_protocol() == Some(b"h2") {
                    Connected::new().negotiated_h2()
                } else {
                    Connected::new()
                }
            }
        }
    }
}

impl Read for UpstreamConn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Plain(io) => Pin::new(io).poll_read(cx, buf),
            Self::Tls(io) => Pin::new(io.as_mut()).poll_read(cx, buf),
        }
    }
}

impl Write for UpstreamConn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(io) => Pin::new(io).poll_write(cx, buf),
            Self::Tls(io) => Pin::new(io.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Plain(io) => Pin::new(io).poll_flush(cx),
            Self::Tls(io) => Pin::new(io.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Plain(io) => Pin::new(io).poll_shutdown(cx),
            Self::Tls(io) => Pin::new(io.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(io) => Pin::new(io).poll_write_vectored(cx, bufs),
            Self::Tls(io) => Pin::new(io.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Plain(io) => io.is_write_vectored(),
            Self::Tls(io) => io.is_write_vectored(),
        }
    }
}
