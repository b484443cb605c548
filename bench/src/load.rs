//! The load client: hyper over rustls, through a proxy by `CONNECT` (or straight to the
//! upstream for the direct baseline), with keep-alive, fixed concurrency and a bounded time.
//!
//! Every request is the same bytes whichever peer it goes through: `GET` with an
//! `Authorization: Bearer <placeholder>` header (sluice swaps it; the others pass it on).
//! Latency is measured per request, from sending the head to the last byte of the body.
//! This module only ever dials the loopback addresses it is given.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, Request};
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls_pki_types::ServerName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::error::BenchError;
use crate::pki::{ClientTls, Proto, UPSTREAM_HOST};

/// How long opening one connection (TCP, CONNECT, TLS, HTTP handshake) may take.
const OPEN_TIMEOUT: Duration = Duration::from_secs(10);

/// How long one small request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How a client reaches the upstream: through a proxy or not, trusting which CA.
pub(crate) struct Route {
    /// The proxy, when there is one.
    pub(crate) proxy: Option<ProxyAccess>,
    /// The TLS trust inside the tunnel (the proxy's CA, or the upstream's for direct).
    pub(crate) tls: ClientTls,
    /// The upstream's address.
    pub(crate) upstream: SocketAddr,
    /// The `Authorization` header every request carries.
    pub(crate) authorization: HeaderValue,
    /// Other headers every request carries (a SigV4 signature's `x-amz-date`, say).
    pub(crate) headers: Vec<(http::HeaderName, HeaderValue)>,
}

/// A proxy's address and the `Proxy-Authorization` it wants.
pub(crate) struct ProxyAccess {
    /// Where it listens.
    pub(crate) addr: SocketAddr,
    /// The full header value, when it wants one.
    pub(crate) authorization: Option<String>,
}

impl Route {
    /// `localhost:PORT`: the CONNECT target and the `Host` / `:authority`.
    pub(crate) fn authority(&self) -> String {
        format!("{UPSTREAM_HOST}:{}", self.upstream.port())
    }

    /// Opens one connection speaking `proto`: TCP, CONNECT when proxied, TLS, HTTP handshake.
    pub(crate) async fn open(&self, proto: Proto) -> Result<Sender, BenchError> {
        tokio::time::timeout(OPEN_TIMEOUT, self.open_now(proto))
            .await
            .map_err(|_| {
                BenchError::Request(format!("opening a connection took over {OPEN_TIMEOUT:?}"))
            })?
    }

    async fn open_now(&self, proto: Proto) -> Result<Sender, BenchError> {
        let io = TokioIo::new(self.connect_tls(proto).await?);
        let sender = match proto {
            Proto::H1 => {
                let (send, conn) = http1::handshake(io)
                    .await
                    .map_err(|e| BenchError::Request(format!("HTTP/1.1 handshake: {e}")))?;
                tokio::spawn(conn);
                Sender::H1(send)
            }
            Proto::H2 => {
                let (send, conn) = http2::handshake(TokioExecutor::new(), io)
                    .await
                    .map_err(|e| BenchError::Request(format!("HTTP/2 handshake: {e}")))?;
                tokio::spawn(conn);
                Sender::H2(send)
            }
        };
        Ok(sender)
    }

    /// TCP to the proxy (and `CONNECT`) or to the upstream, then TLS offering `proto`: the
    /// stream a client speaks HTTP in.
    pub(crate) async fn connect_tls(
        &self,
        proto: Proto,
    ) -> Result<TlsStream<TcpStream>, BenchError> {
        let dial = self.proxy.as_ref().map_or(self.upstream, |p| p.addr);
        let mut tcp = TcpStream::connect(dial)
            .await
            .map_err(|e| BenchError::Request(format!("connect {dial}: {e}")))?;
        let _ = tcp.set_nodelay(true);
        if let Some(proxy) = &self.proxy {
            connect_tunnel(&mut tcp, &self.authority(), proxy.authorization.as_deref()).await?;
        }
        let name =
            ServerName::try_from(UPSTREAM_HOST).map_err(|e| BenchError::Tls(e.to_string()))?;
        let tls = TlsConnector::from(self.tls.config(proto))
            .connect(name, tcp)
            .await
            .map_err(|e| BenchError::Request(format!("TLS inside the tunnel: {e}")))?;
        Ok(tls)
    }

    /// A `GET path` request for `proto`, with the route's `Authorization`.
    fn request(&self, path: &str, proto: Proto) -> Request<Empty<Bytes>> {
        let authority = self.authority();
        let builder = match proto {
            // HTTP/1.1: origin-form target and a Host header.
            Proto::H1 => Request::get(path).header(http::header::HOST, authority),
            // HTTP/2: hyper takes :scheme and :authority from an absolute URI.
            Proto::H2 => Request::get(format!("https://{authority}{path}")),
        };
        let mut request = builder
            .body(Empty::new())
            .unwrap_or_else(|_| Request::new(Empty::new()));
        request
            .headers_mut()
            .insert(http::header::AUTHORIZATION, self.authorization.clone());
        for (name, value) in &self.headers {
            request.headers_mut().insert(name.clone(), value.clone());
        }
        request
    }
}

/// Sends `CONNECT authority` and reads the proxy's answer head; anything but `200` fails.
async fn connect_tunnel(
    tcp: &mut TcpStream,
    authority: &str,
    proxy_authorization: Option<&str>,
) -> Result<(), BenchError> {
    match send_connect(tcp, authority, proxy_authorization).await {
        Ok(200) => Ok(()),
        Ok(status) => Err(BenchError::Request(format!(
            "CONNECT answered {status}, expected 200"
        ))),
        Err(why) => Err(BenchError::Request(why)),
    }
}

/// Sends `CONNECT authority` (with `Proxy-Authorization` when given) and returns the status
/// of the proxy's answer, read with httparse; an error when the answer does not arrive
/// whole (cut off, or a head over 16 KiB).
pub(crate) async fn send_connect(
    tcp: &mut TcpStream,
    authority: &str,
    proxy_authorization: Option<&str>,
) -> Result<u16, String> {
    let mut head = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n");
    if let Some(value) = proxy_authorization {
        head.push_str("Proxy-Authorization: ");
        head.push_str(value);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    tcp.write_all(head.as_bytes())
        .await
        .map_err(|e| format!("sending CONNECT: {e}"))?;
    // The proxy says nothing after its answer head until our ClientHello, so reading in
    // chunks cannot swallow tunnel bytes.
    let mut received = Vec::with_capacity(256);
    let mut buf = [0u8; 512];
    loop {
        let n = tcp
            .read(&mut buf)
            .await
            .map_err(|e| format!("reading the CONNECT answer: {e}"))?;
        if n == 0 || received.len() > 16 * 1024 {
            return Err(format!(
                "the CONNECT answer ended after {} bytes, expected a whole head",
                received.len()
            ));
        }
        received.extend_from_slice(&buf[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut answer = httparse::Response::new(&mut headers);
        match answer.parse(&received) {
            Ok(httparse::Status::Complete(_)) => return Ok(answer.code.unwrap_or(0)),
            Ok(httparse::Status::Partial) => {}
            Err(e) => return Err(format!("the CONNECT answer is not HTTP: {e}")),
        }
    }
}

/// One open connection's request sender.
pub(crate) enum Sender {
    /// HTTP/1.1: one request at a time.
    H1(http1::SendRequest<Empty<Bytes>>),
    /// HTTP/2: clones share the connection, one stream each.
    H2(http2::SendRequest<Empty<Bytes>>),
}

/// A response's status, the headers the harness looks at, and its body (kept or counted).
pub(crate) struct Answer {
    /// The status code.
    pub(crate) status: u16,
    /// `x-bench-auth`, when present.
    pub(crate) bench_auth: Option<String>,
    /// Body bytes received.
    pub(crate) bytes: u64,
    /// The body itself, when asked to keep it.
    pub(crate) body: Vec<u8>,
}

impl Sender {
    fn proto(&self) -> Proto {
        match self {
            Self::H1(_) => Proto::H1,
            Self::H2(_) => Proto::H2,
        }
    }

    /// Sends `GET path` and reads the whole body, keeping it when `keep` (else counting).
    pub(crate) async fn get(
        &mut self,
        route: &Route,
        path: &str,
        keep: bool,
    ) -> Result<Answer, BenchError> {
        let request = route.request(path, self.proto());
        let failed = |e: hyper::Error| BenchError::Request(format!("GET {path}: {e}"));
        let response = match self {
            Self::H1(send) => {
                send.ready().await.map_err(failed)?;
                send.send_request(request).await.map_err(failed)?
            }
            Self::H2(send) => {
                send.ready().await.map_err(failed)?;
                send.send_request(request).await.map_err(failed)?
            }
        };
        let status = response.status().as_u16();
        let bench_auth = response
            .headers()
            .get("x-bench-auth")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut body = response.into_body();
        let mut bytes = 0u64;
        let mut kept = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(failed)?;
            if let Ok(data) = frame.into_data() {
                bytes += data.len() as u64;
                if keep {
                    kept.extend_from_slice(&data);
                }
            }
        }
        Ok(Answer {
            status,
            bench_auth,
            bytes,
            body: kept,
        })
    }
}

/// What a load phase measured (before it is turned into rates).
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// Latency of each completed request, in nanoseconds.
    pub(crate) latencies_ns: Vec<u64>,
    /// Requests that failed.
    pub(crate) errors: u64,
    /// The first failure, for the report.
    pub(crate) first_error: Option<String>,
    /// Wall time of the measured phase.
    pub(crate) elapsed: Duration,
    /// Body bytes received.
    pub(crate) bytes: u64,
    /// Whether the phase hit its time bound before finishing (large body only).
    pub(crate) timed_out: bool,
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        self.latencies_ns.extend(other.latencies_ns);
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
        self.bytes += other.bytes;
    }

    fn fail(&mut self, error: BenchError) {
        self.errors += 1;
        if self.first_error.is_none() {
            self.first_error = Some(error.to_string());
        }
    }
}

/// Small GETs on kept-alive connections: `connections` connections speaking `proto`,
/// `streams` concurrent requests on each (HTTP/2 only; 1 for HTTP/1.1), for `duration`.
pub(crate) async fn small(
    route: Arc<Route>,
    proto: Proto,
    connections: usize,
    streams: usize,
    duration: Duration,
) -> Tally {
    let mut tally = Tally::default();
    // Open and warm every connection first: the measured phase is requests only.
    let mut senders = Vec::with_capacity(connections);
    for _ in 0..connections {
        match route.open(proto).await {
            Ok(mut sender) => match sender.get(&route, "/small", false).await {
                Ok(_) => senders.push(sender),
                Err(e) => tally.fail(e),
            },
            Err(e) => tally.fail(e),
        }
    }
    if senders.is_empty() {
        return tally;
    }
    // One worker per HTTP/1.1 connection; `streams` workers sharing each HTTP/2 connection.
    let mut handles = Vec::with_capacity(senders.len() * streams);
    for sender in senders {
        match sender {
            Sender::H2(send) => {
                handles.extend((0..streams).map(|_| Sender::H2(send.clone())));
            }
            h1 => handles.push(h1),
        }
    }
    let barrier = Arc::new(tokio::sync::Barrier::new(handles.len() + 1));
    let mut tasks = Vec::with_capacity(handles.len());
    for mut sender in handles {
        let route = route.clone();
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            barrier.wait().await;
            let deadline = Instant::now() + duration;
            while Instant::now() < deadline {
                let started = Instant::now();
                let result =
                    tokio::time::timeout(REQUEST_TIMEOUT, sender.get(&route, "/small", false))
                        .await
                        .unwrap_or_else(|_| {
                            Err(BenchError::Request(format!(
                                "no answer within {REQUEST_TIMEOUT:?}"
                            )))
                        });
                match result {
                    Ok(answer) if answer.status == 200 => {
                        tally.latencies_ns.push(started.elapsed().as_nanos() as u64);
                        tally.bytes += answer.bytes;
                    }
                    Ok(answer) => tally.fail(BenchError::Request(format!(
                        "GET /small answered {}, expected 200",
                        answer.status
                    ))),
                    Err(e) => {
                        tally.fail(e);
                        // A broken connection is replaced, so one failure is one error.
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        if let Ok(fresh) = route.open(sender.proto()).await {
                            sender = fresh;
                        }
                    }
                }
            }
            tally
        }));
    }
    barrier.wait().await;
    let started = Instant::now();
    for task in tasks {
        if let Ok(worker) = task.await {
            tally.merge(worker);
        }
    }
    tally.elapsed = started.elapsed();
    tally
}

/// New tunnels: `concurrency` workers, each opening a fresh connection (CONNECT and TLS,
/// no resumption), sending one small GET over HTTP/1.1 and closing, for `duration`.
pub(crate) async fn tunnels(route: Arc<Route>, concurrency: usize, duration: Duration) -> Tally {
    let barrier = Arc::new(tokio::sync::Barrier::new(concurrency + 1));
    let mut tasks = Vec::with_capacity(concurrency);
    for _ in 0..concurrency {
        let route = route.clone();
        let barrier = barrier.clone();
        tasks.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            barrier.wait().await;
            let deadline = Instant::now() + duration;
            while Instant::now() < deadline {
                let started = Instant::now();
                let result = async {
                    let mut sender = route.open(Proto::H1).await?;
                    sender.get(&route, "/small", false).await
                }
                .await;
                match result {
                    Ok(answer) if answer.status == 200 => {
                        tally.latencies_ns.push(started.elapsed().as_nanos() as u64);
                        tally.bytes += answer.bytes;
                    }
                    Ok(answer) => tally.fail(BenchError::Request(format!(
                        "GET /small answered {}, expected 200",
                        answer.status
                    ))),
                    Err(e) => {
                        tally.fail(e);
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
            }
            tally
        }));
    }
    barrier.wait().await;
    let started = Instant::now();
    let mut tally = Tally::default();
    for task in tasks {
        if let Ok(worker) = task.await {
            tally.merge(worker);
        }
    }
    tally.elapsed = started.elapsed();
    tally
}

/// One large download over HTTP/1.1 on a warmed connection, bounded by `limit`; bytes are
/// counted, never kept, and a download cut short by the bound still reports what arrived.
pub(crate) async fn large(route: Arc<Route>, limit: Duration) -> Tally {
    let mut tally = Tally::default();
    let mut sender = match route.open(Proto::H1).await {
        Ok(sender) => sender,
        Err(e) => {
            tally.fail(e);
            return tally;
        }
    };
    if let Err(e) = sender.get(&route, "/small", false).await {
        tally.fail(e);
        return tally;
    }
    let Sender::H1(mut send) = sender else {
        tally.fail(BenchError::Request(
            "an HTTP/1.1 connection came back as HTTP/2 (a sluice-bench bug)".to_owned(),
        ));
        return tally;
    };
    let received = Arc::new(AtomicU64::new(0));
    let request = route.request("/large", Proto::H1);
    let started = Instant::now();
    let download = {
        let received = received.clone();
        async move {
            send.ready().await?;
            let response = send.send_request(request).await?;
            let status = response.status().as_u16();
            let mut body = response.into_body();
            while let Some(frame) = body.frame().await {
                if let Ok(data) = frame?.into_data() {
                    received.fetch_add(data.len() as u64, Ordering::Relaxed);
                }
            }
            Ok::<u16, hyper::Error>(status)
        }
    };
    match tokio::time::timeout(limit, download).await {
        Ok(Ok(200)) => tally.latencies_ns.push(started.elapsed().as_nanos() as u64),
        Ok(Ok(status)) => tally.fail(BenchError::Request(format!(
            "GET /large answered {status}, expected 200"
        ))),
        Ok(Err(e)) => tally.fail(BenchError::Request(format!("GET /large: {e}"))),
        Err(_) => tally.timed_out = true,
    }
    tally.elapsed = started.elapsed();
    tally.bytes = received.load(Ordering::Relaxed);
    tally
}
