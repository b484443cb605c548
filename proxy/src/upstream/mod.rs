//! The upstream leg: resolve, address policy, dial, TLS, and a keep-alive pool per host.
//!
//! Upstream certificates are always verified, against the web PKI roots plus any
//! `--upstream-ca` files; there is no switch to turn verification off. Every dial goes
//! through the address policy on the exact address dialled.

mod address;
mod connector;
mod pinned;
mod pool;
mod resolve;
pub(crate) mod via;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response, Version};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use rustls::RootCertStore;
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use tokio::net::TcpStream;

pub(crate) use connector::{Connector, UpstreamConn};
pub(crate) use pinned::{PinDemand, PinSet};
pub(crate) use resolve::{Refused, Resolver};

use crate::body::Body;
use pinned::{PinBase, PinnedLegs};
use pool::Http1Pool;

/// Timeouts on the upstream leg.
///
/// # Defaults
/// - `connect`: 10 s
/// - `tls`: 10 s
/// - `response`: 60 s, until the response head arrives
/// - `idle`: 90 s, for a pooled keep-alive connection
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// TCP connect.
    pub connect: Duration,
    /// TLS handshake.
    pub tls: Duration,
    /// From sending the request to receiving the response head.
    pub response: Duration,
    /// How long an idle pooled connection is kept.
    pub idle: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            tls: Duration::from_secs(10),
            response: Duration::from_secs(60),
            idle: Duration::from_secs(90),
        }
    }
}

/// Why the upstream leg failed. Never carries request bytes.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UpstreamError {
    /// The name did not resolve.
    #[error("cannot resolve {host}: {source}")]
    Resolve {
        /// The name.
        host: String,
        /// The resolver's error.
        source: std::io::Error,
    },
    /// A resolved address is refused by the address policy.
    #[error("{host} resolves to {addr}, which is {why}")]
    Blocked {
        /// The name.
        host: String,
        /// The refused address.
        addr: SocketAddr,
        /// Why.
        why: Refused,
    },
    /// TCP connect failed.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// The address dialled.
        addr: SocketAddr,
        /// The socket error.
        source: std::io::Error,
    },
    /// TCP connect did not finish in time.
    #[error("connecting to {addr} timed out")]
    ConnectTimeout {
        /// The address dialled.
        addr: SocketAddr,
    },
    /// The TLS handshake failed, certificate verification included.
    #[error("TLS with {host} failed: {source}")]
    Tls {
        /// The name verified.
        host: String,
        /// The TLS error.
        source: std::io::Error,
    },
    /// Ordinary verification passed, but no verified chain holds a pin of these secrets:
    /// nothing of the request was sent.
    #[error("the certificate chain of {host} holds no pin (pin:) of secret {}", .secrets.join(", "))]
    PinMismatch {
        /// The name verified.
        host: String,
        /// The pinned secrets whose pins were not met.
        secrets: Vec<String>,
    },
    /// The TLS handshake did not finish in time.
    #[error("TLS handshake with {host} timed out")]
    TlsTimeout {
        /// The name.
        host: String,
    },
    /// The target URI cannot be dialled.
    #[error("cannot dial {0}: not an http or https target with a host")]
    BadTarget(String),
    /// The egress proxy could not be reached, or did not answer `CONNECT` as a proxy.
    #[error("the upstream proxy {proxy} could not be reached: {why}")]
    ProxyUnreachable {
        /// The proxy, `host:port`.
        proxy: String,
        /// What failed.
        why: String,
    },
    /// The egress proxy asked for credentials (`407`): none, or the wrong ones.
    #[error("the upstream proxy {proxy} refused sluice's credentials (407)")]
    ProxyAuth {
        /// The proxy, `host:port`.
        proxy: String,
    },
    /// The egress proxy refused the tunnel.
    #[error("the upstream proxy {proxy} refused a tunnel to {target} with status {status}")]
    ProxyRefused {
        /// The proxy, `host:port`.
        proxy: String,
        /// The origin asked for.
        target: String,
        /// Its status.
        status: u16,
    },
}

/// The declaration's `allow_ips` check, of one generation.
pub(crate) type AllowIps = Arc<dyn Fn(IpAddr) -> bool + Send + Sync>;

/// What the dialler needs: pins, address policy and timeouts. One per generation of the
/// declaration: its address policy is that generation's `allow_ips`, so a connection (and
/// a pool) dialled under one declaration is never used under another.
pub(crate) struct Dialer {
    allow_ips: AllowIps,
    common: Arc<DialerCommon>,
}

/// What every generation's dialler shares.
struct DialerCommon {
    resolver: Resolver,
    /// The organisation's egress proxy, when upstream connections go through one.
    via: Option<Arc<via::UpstreamProxy>>,
    own_listeners: Vec<SocketAddr>,
    timeouts: Timeouts,
    /// TCP connections dialled, for the metrics (one per pool miss or tunnel; shared by
    /// every worker, touched only when a connection is made).
    dials: std::sync::atomic::AtomicU64,
    /// Every HTTP/1.1 pool still alive, for the idle gauge a scrape reads.
    http1_pools: std::sync::Mutex<Vec<std::sync::Weak<Http1Pool>>>,
}

/// Errors building the upstream leg at start.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamSetupError {
    /// An `--upstream-ca` file could not be read or holds no certificate.
    #[error("--upstream-ca {path}: {why}")]
    CaFile {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        why: String,
    },
    /// rustls refused the configuration.
    #[error("upstream TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    /// rustls refused to build the certificate verifier.
    #[error("upstream certificate verifier: {0}")]
    Verifier(#[from] rustls::client::VerifierBuilderError),
}

/// The upstream leg: two keep-alive pools and a raw dialler for tunnels.
///
/// The upstream connection speaks what the client spoke to sluice: a request that came
/// over HTTP/1.1 goes out over a pool that offers only `http/1.1` (sluice's own,
/// `pool.rs`), one that came over HTTP/2 over a pool that offers `h2` first (hyper-util's).
/// A client's connection thus keeps its own
/// upstream connection rather than sharing one multiplexed HTTP/2 connection with every
/// other tunnel to that host (measured: a shared h2 leg halves small-request throughput
/// and large-body speed for HTTP/1.1 clients, docs/benchmarks.md).
#[derive(Clone)]
pub(crate) struct Upstream {
    /// For requests that arrived over HTTP/1.1 (and plain HTTP): offers `http/1.1` only.
    http1: Arc<Http1Pool>,
    /// For requests that arrived over HTTP/2: offers `h2`, then `http/1.1`.
    h2: Client<Connector, Body>,
    dialer: Arc<Dialer>,
    /// The TLS configuration offering `h2` and `http/1.1`.
    tls: Arc<rustls::ClientConfig>,
    /// The `http/1.1`-only TLS configuration, also for upgrades (WebSocket), which
    /// HTTP/2 cannot carry.
    tls_http1: Arc<rustls::ClientConfig>,
    timeouts: Timeouts,
    /// What pinned legs' verifiers are built from.
    pin_base: Arc<PinBase>,
    /// A leg of its own for each set of pins requests carry (this worker's, this
    /// generation's): `pin.rs`.
    pinned: Arc<PinnedLegs<PinnedLeg>>,
}

/// The pools and TLS configuration of requests that carry one [`PinDemand`].
struct PinnedLeg {
    http1: Arc<Http1Pool>,
    h2: Client<Connector, Body>,
    tls_http1: Arc<rustls::ClientConfig>,
}

/// A keep-alive pool whose new connections are dialled by `dialer` and offer `tls`'s ALPN.
fn pool(dialer: &Arc<Dialer>, tls: &Arc<rustls::ClientConfig>) -> Client<Connector, Body> {
    Client::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(dialer.common.timeouts.idle)
        .pool_max_idle_per_host(64)
        // Never follow anything on the client's behalf, never retry a request whose body
        // may have been partly sent.
        .retry_canceled_requests(false)
        .set_host(false)
        .build(Connector {
            dialer: dialer.clone(),
            tls: tls.clone(),
        })
}

/// How to build the upstream leg.
pub(crate) struct UpstreamConfig {
    /// `--resolve` pins, hosts normalised.
    pub pins: HashMap<String, IpAddr>,
    /// The first generation's `allow_ips` check.
    pub allow_ips: AllowIps,
    /// sluice's own listening addresses, never dialled.
    pub own_listeners: Vec<SocketAddr>,
    /// Extra roots (`--upstream-ca`).
    pub extra_roots: Vec<PathBuf>,
    /// Timeouts.
    pub timeouts: Timeouts,
    /// The organisation's egress proxy (`--upstream-proxy`).
    pub via: Option<Arc<via::UpstreamProxy>>,
}

impl Upstream {
    /// Builds the client, its TLS configuration and its pool.
    pub(crate) fn new(config: UpstreamConfig) -> Result<Self, UpstreamSetupError> {
        let mut roots = RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        for path in &config.extra_roots {
            for cert in load_pem_certs(path)? {
                roots.add(cert).map_err(|e| UpstreamSetupError::CaFile {
                    path: path.clone(),
                    why: e.to_string(),
                })?;
            }
        }
        let roots = Arc::new(roots);
        let provider = crate::suites::provider();
        let pin_base = Arc::new(PinBase::new(roots.clone(), &provider)?);
        let mut tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let mut tls_http1 = tls.clone();
        tls_http1.alpn_protocols = vec![b"http/1.1".to_vec()];
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let dialer = Arc::new(Dialer {
            allow_ips: config.allow_ips,
            common: Arc::new(DialerCommon {
                resolver: Resolver::new(config.pins),
                via: config.via,
                own_listeners: config.own_listeners,
                timeouts: config.timeouts,
                dials: std::sync::atomic::AtomicU64::new(0),
                http1_pools: std::sync::Mutex::new(Vec::new()),
            }),
        });
        let (tls, tls_http1) = (Arc::new(tls), Arc::new(tls_http1));
        Ok(Self {
            http1: Http1Pool::new(dialer.clone(), tls_http1.clone(), config.timeouts.idle),
            h2: pool(&dialer, &tls),
            dialer,
            tls,
            tls_http1,
            timeouts: config.timeouts,
            pin_base,
            pinned: Arc::default(),
        })
    }

    /// The same leg with pools of its own, for a worker thread: its upstream connections
    /// then live and are reused on that thread's runtime only, never woken from another.
    pub(crate) fn with_own_pools(&self) -> Self {
        Self {
            http1: Http1Pool::new(
                self.dialer.clone(),
                self.tls_http1.clone(),
                self.timeouts.idle,
            ),
            h2: pool(&self.dialer, &self.tls),
            dialer: self.dialer.clone(),
            tls: self.tls.clone(),
            tls_http1: self.tls_http1.clone(),
            timeouts: self.timeouts,
            pin_base: self.pin_base.clone(),
            pinned: Arc::default(),
        }
    }

    /// The same leg for another generation of the declaration: its `allow_ips`, and pools
    /// of its own, so that no connection dialled under the generation before is reused
    /// under this one (tunnels still open keep the leg they started with).
    pub(crate) fn for_generation(&self, allow_ips: AllowIps) -> Self {
        let dialer = Arc::new(Dialer {
            allow_ips,
            common: self.dialer.common.clone(),
        });
        Self {
            http1: Http1Pool::new(dialer.clone(), self.tls_http1.clone(), self.timeouts.idle),
            h2: pool(&dialer, &self.tls),
            dialer,
            tls: self.tls.clone(),
            tls_http1: self.tls_http1.clone(),
            timeouts: self.timeouts,
            pin_base: self.pin_base.clone(),
            pinned: Arc::default(),
        }
    }

    /// The leg of requests that carry `demand`, built on first use.
    fn pinned_leg(&self, demand: &PinDemand) -> Arc<PinnedLeg> {
        self.pinned.get(demand, || {
            // One session store for the leg's two configurations, and for nothing else.
            let resumption = rustls::client::Resumption::in_memory_sessions(64);
            let tls = self.pin_base.config_for(&self.tls, demand, &resumption);
            let tls_http1 = self
                .pin_base
                .config_for(&self.tls_http1, demand, &resumption);
            PinnedLeg {
                http1: Http1Pool::new(self.dialer.clone(), tls_http1.clone(), self.timeouts.idle),
                h2: pool(&self.dialer, &tls),
                tls_http1,
            }
        })
    }

    /// TCP connections dialled upstream so far, by every worker.
    pub(crate) fn dials(&self) -> u64 {
        self.dialer
            .common
            .dials
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Tells this leg's pools that a newer generation's serve new connections: the
    /// HTTP/1.1 pool then keeps its idle connections seconds, not the idle timeout (only
    /// the tunnels still open under this generation use them). hyper-util's HTTP/2 pool
    /// holds one connection per origin, closed when the last tunnel using it ends.
    pub(crate) fn retire(&self) {
        self.http1.retire();
        self.pinned.for_each(|leg| leg.http1.retire());
    }

    /// Idle keep-alive connections in every HTTP/1.1 pool now (every worker, every
    /// generation still serving). hyper-util's HTTP/2 pool does not tell its own.
    pub(crate) fn idle_http1(&self) -> u64 {
        let mut pools = self
            .dialer
            .common
            .http1_pools
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut idle = 0;
        pools.retain(|pool| match pool.upgrade() {
            Some(pool) => {
                idle += pool.idle_count();
                true
            }
            None => false,
        });
        idle
    }

    /// Sends a request (absolute URI, `https` or `http`) over a pooled connection of the
    /// protocol the client spoke (`downstream`), and waits for the response head, within the
    /// response timeout. A request carrying pinned secrets (`pins`) goes only over a
    /// connection of the leg for exactly those pins.
    pub(crate) async fn send(
        &self,
        request: Request<Body>,
        downstream: Version,
        pins: Option<&PinDemand>,
    ) -> Result<Response<Incoming>, SendError> {
        let leg = pins.map(|demand| self.pinned_leg(demand));
        let (http1, h2) = match &leg {
            Some(leg) => (&leg.http1, &leg.h2),
            None => (&self.http1, &self.h2),
        };
        if downstream != Version::HTTP_2 {
            return tokio::time::timeout(self.timeouts.response, http1.send(request))
                .await
                .unwrap_or(Err(SendError::Timeout));
        }
        match tokio::time::timeout(self.timeouts.response, h2.request(request)).await {
            Err(_) => Err(SendError::Timeout),
            Ok(Ok(response)) => Ok(response),
            Ok(Err(error)) => {
                let dial = std::error::Error::source(&error)
                    .and_then(|s| s.downcast_ref::<UpstreamError>())
                    .map(clone_dial_error);
                match dial {
                    Some(dial) => Err(SendError::Dial(dial)),
                    None => Err(SendError::Http(Box::new(error))),
                }
            }
        }
    }

    /// A fresh, unpooled HTTP/1.1 connection over verified TLS (meeting `pins`, when the
    /// handshake carries pinned secrets), with upgrades enabled: for a WebSocket
    /// handshake, whose connection becomes the upgraded stream.
    pub(crate) async fn connect_http1(
        &self,
        host: &str,
        port: u16,
        pins: Option<&PinDemand>,
    ) -> Result<hyper::client::conn::http1::SendRequest<Body>, UpstreamError> {
        let tls = match pins {
            Some(demand) => self.pinned_leg(demand).tls_http1.clone(),
            None => self.tls_http1.clone(),
        };
        let conn = self.dialer.connect_tls(host, port, tls).await?;
        http1_over(conn, host, true).await
    }

    /// The timeouts this leg was built with.
    pub(crate) fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// Resolves, checks and dials a raw TCP connection (passthrough tunnels).
    pub(crate) async fn dial(&self, host: &str, port: u16) -> Result<TcpStream, UpstreamError> {
        self.dialer.dial(host, port).await
    }
}

/// An HTTP/1.1 client connection over `conn`, its connection task spawned on the current
/// runtime; with `upgrades`, a `101` turns the connection into the joined stream.
async fn http1_over(
    conn: UpstreamConn,
    host: &str,
    upgrades: bool,
) -> Result<hyper::client::conn::http1::SendRequest<Body>, UpstreamError> {
    let (send, connection) = hyper::client::conn::http1::handshake(conn)
        .await
        .map_err(|e| UpstreamError::Tls {
            host: host.to_owned(),
            source: std::io::Error::other(e.to_string()),
        })?;
    tokio::spawn(async move {
        let ended = if upgrades {
            connection.with_upgrades().await
        } else {
            connection.await
        };
        if let Err(error) = ended {
            tracing::debug!(%error, "upstream connection ended");
        }
    });
    Ok(send)
}

/// Why sending a request upstream failed.
#[derive(Debug)]
pub(crate) enum SendError {
    /// Dialling failed (resolution, address policy, connect, TLS).
    Dial(UpstreamError),
    /// No response head within the response timeout.
    Timeout,
    /// The HTTP exchange failed (kept whole: the caller looks in its sources for a body
    /// that sluice itself stopped).
    Http(Box<dyn std::error::Error + Send + Sync>),
}

impl SendError {
    /// The innermost error of type `E` in the failure's source chain, if any.
    pub(crate) fn find_source<E: std::error::Error + 'static>(&self) -> Option<&E> {
        let Self::Http(error) = self else {
            return None;
        };
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error.as_ref());
        while let Some(current) = source {
            if let Some(found) = current.downcast_ref::<E>() {
                return Some(found);
            }
            source = current.source();
        }
        None
    }
}

/// `UpstreamError` holds `io::Error`s, which do not clone; keep their kind and text.
fn clone_dial_error(e: &UpstreamError) -> UpstreamError {
    let io = |s: &std::io::Error| std::io::Error::new(s.kind(), s.to_string());
    match e {
        UpstreamError::Resolve { host, source } => UpstreamError::Resolve {
            host: host.clone(),
            source: io(source),
        },
        UpstreamError::Blocked { host, addr, why } => UpstreamError::Blocked {
            host: host.clone(),
            addr: *addr,
            why: *why,
        },
        UpstreamError::Connect { addr, source } => UpstreamError::Connect {
            addr: *addr,
            source: io(source),
        },
        UpstreamError::ConnectTimeout { addr } => UpstreamError::ConnectTimeout { addr: *addr },
        UpstreamError::ProxyUnreachable { proxy, why } => UpstreamError::ProxyUnreachable {
            proxy: proxy.clone(),
            why: why.clone(),
        },
        UpstreamError::ProxyAuth { proxy } => UpstreamError::ProxyAuth {
            proxy: proxy.clone(),
        },
        UpstreamError::ProxyRefused {
            proxy,
            target,
            status,
        } => UpstreamError::ProxyRefused {
            proxy: proxy.clone(),
            target: target.clone(),
            status: *status,
        },
        UpstreamError::Tls { host, source } => UpstreamError::Tls {
            host: host.clone(),
            source: io(source),
        },
        UpstreamError::PinMismatch { host, secrets } => UpstreamError::PinMismatch {
            host: host.clone(),
            secrets: secrets.clone(),
        },
        UpstreamError::TlsTimeout { host } => UpstreamError::TlsTimeout { host: host.clone() },
        UpstreamError::BadTarget(t) => UpstreamError::BadTarget(t.clone()),
    }
}

fn load_pem_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, UpstreamSetupError> {
    let err = |why: String| UpstreamSetupError::CaFile {
        path: path.to_owned(),
        why,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| err(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| err(e.to_string()))?;
    if certs.is_empty() {
        return Err(err("no PEM certificate in the file".into()));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(allow_ips: AllowIps) -> UpstreamConfig {
        UpstreamConfig {
            pins: HashMap::new(),
            allow_ips,
            own_listeners: Vec::new(),
            extra_roots: Vec::new(),
            timeouts: Timeouts::default(),
            via: None,
        }
    }

    fn leg(allow_ips: AllowIps) -> Upstream {
        Upstream::new(config(allow_ips)).unwrap()
    }

    #[tokio::test]
    async fn each_generation_dials_under_its_own_allow_ips_and_pools() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let first = leg(Arc::new(|ip: IpAddr| ip.is_loopback()));
        assert!(first.dial("127.0.0.1", port).await.is_ok());
        // A reload that drops loopback from allow_ips: the next generation is refused it...
        let next = first.for_generation(Arc::new(|_| false));
        assert!(matches!(
            next.dial("127.0.0.1", port).await,
            Err(UpstreamError::Blocked { .. })
        ));
        // ...while what the generation before still serves dials under its own.
        assert!(first.dial("127.0.0.1", port).await.is_ok());
        // One dial counter for the run (the refused address was never dialled), and pools
        // of each generation's own.
        assert_eq!((first.dials(), next.dials()), (2, 2));
        assert!(!Arc::ptr_eq(&first.http1, &next.http1));
        assert_eq!(next.idle_http1(), 0);
    }

    /// Through an egress proxy, an address the sandbox wrote out (an IP literal) is still
    /// held to the address policy: refused before the egress proxy is asked for it. A name
    /// goes to the egress proxy, which resolves it.
    #[tokio::test]
    async fn an_ip_literal_through_the_egress_proxy_is_still_under_the_address_policy() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let asked = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let seen = asked.clone();
        tokio::spawn(async move {
            while let Ok((mut tcp, _)) = listener.accept().await {
                let mut head = vec![0; 1024];
                let n = tcp.read(&mut head).await.unwrap_or(0);
                let line = String::from_utf8_lossy(&head[..n]);
                seen.lock()
                    .unwrap()
                    .push(line.lines().next().unwrap_or("").to_owned());
                let _ = tcp
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await;
            }
        });
        let via = via::UpstreamProxy::parse(&format!("http://127.0.0.1:{port}"), "").unwrap();
        let leg = Upstream::new(UpstreamConfig {
            via: Some(Arc::new(via)),
            ..config(Arc::new(|ip: IpAddr| ip.is_loopback()))
        })
        .unwrap();
        // Also in the spellings a resolver reads as addresses: 2852039166 and 0xa9.0xfe.169.254
        // are 169.254.169.254, 10.1 is 10.0.0.1.
        for literal in [
            "10.1.2.3",
            "169.254.169.254",
            "[::ffff:10.1.2.3]",
            // Unbracketed, as a tunnel's target reaches the dialer.
            "::ffff:10.1.2.3",
            "fd00::1",
            "2852039166",
            "0xa9.0xfe.169.254",
            "10.1",
        ] {
            assert!(
                matches!(
                    leg.dial(literal, 443).await,
                    Err(UpstreamError::Blocked { .. })
                ),
                "{literal}"
            );
        }
        assert!(leg.dial("api.test", 443).await.is_ok());
        assert_eq!(*asked.lock().unwrap(), ["CONNECT api.test:443 HTTP/1.1"]);
    }

    /// A keep-alive HTTP/1.1 origin on loopback answering `ok`.
    async fn origin() -> u16 {
        use http_body_util::Full;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let service = hyper::service::service_fn(|_| async {
                    Ok::<_, std::convert::Infallible>(Response::new(Full::new(
                        bytes::Bytes::from_static(b"ok"),
                    )))
                });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(tcp), service),
                );
            }
        });
        port
    }

    /// One request through `leg`'s HTTP/1.1 pool, read to its end; then waits for its
    /// connection to be idle there.
    async fn one_request(leg: &Upstream, port: u16) {
        use http_body_util::BodyExt;
        let request = Request::get(format!("http://127.0.0.1:{port}/"))
            .body(crate::body::empty())
            .unwrap();
        let response = leg.http1.send(request).await.unwrap();
        response.into_body().collect().await.unwrap();
        for _ in 0..100 {
            if leg.http1.idle_count() == 1 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("the connection never went idle");
    }

    #[tokio::test]
    async fn a_superseded_generation_keeps_idle_connections_seconds_not_the_idle_timeout() {
        let port = origin().await;
        let kept = leg(Arc::new(|ip: IpAddr| ip.is_loopback()));
        let retired = kept.for_generation(Arc::new(|ip: IpAddr| ip.is_loopback()));
        one_request(&kept, port).await;
        one_request(&retired, port).await;
        // A retired pool keeps what is younger than its few seconds...
        retired.retire();
        assert_eq!(retired.http1.idle_count(), 1);
        // ...and lets it go once it is older; the pool in force keeps it for the idle
        // timeout.
        retired.http1.age(Duration::from_secs(3));
        kept.http1.age(Duration::from_secs(3));
        retired.http1.sweep();
        kept.http1.sweep();
        assert_eq!(retired.http1.idle_count(), 0);
        assert_eq!(kept.http1.idle_count(), 1);
    }
}
