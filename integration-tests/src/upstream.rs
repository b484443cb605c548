//! A TLS upstream on 127.0.0.1 that records exactly what reached it.
//!
//! Paths: `/echo` answers with the request body; `/echo/gzip`, `/echo/br`, `/echo/zstd`
//! and `/echo/deflate` answer with it compressed (and `Content-Encoding` set);
//! `/echo/trickle` answers with it one byte per frame; `/echo/header` answers `ok` with the
//! body copied into `x-echo`, `location` and `set-cookie` headers; `/status/NNN` answers
//! that status with no body and the request body in `x-echo`; `/bomb` answers 8 MiB of
//! zeros gzip'd; `/encoded/x-unknown` answers a coding nobody knows; `/slow` waits 3 s;
//! `/ws` with an `Upgrade` header switches protocols and echoes the stream uppercased;
//! anything else answers `ok`. Every answer carries `x-upstream-conn: N`, the number of the TCP connection that
//! served it, so tests can see keep-alive reuse.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, Uri, Version};
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::io::Write;

use crate::listen::{TlsListener, serve_by_alpn};
use crate::pki::TestPki;

/// One request as the upstream received it.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// Method.
    pub method: Method,
    /// Target.
    pub uri: Uri,
    /// HTTP version on the upstream leg.
    pub version: Version,
    /// Headers.
    pub headers: HeaderMap,
    /// The whole body.
    pub body: Bytes,
}

/// The running upstream.
pub struct RecordingUpstream {
    listener: TlsListener,
    records: Arc<Mutex<Vec<Recorded>>>,
    handshakes: Arc<AtomicUsize>,
}

impl RecordingUpstream {
    /// Starts an upstream serving `names` with a certificate from `pki`, offering `alpn`.
    pub async fn start(pki: &TestPki, names: &[&str], alpn: &[&[u8]]) -> Self {
        Self::start_with_config(pki.server_config(names, alpn)).await
    }

    /// Starts an upstream with a server configuration of the test's making.
    pub async fn start_with_config(config: Arc<rustls::ServerConfig>) -> Self {
        let records = Arc::new(Mutex::new(Vec::new()));
        let handshakes = Arc::new(AtomicUsize::new(0));
        let (task_records, task_handshakes) = (records.clone(), handshakes.clone());
        let listener = TlsListener::start(config, move |tls, conn_no| {
            task_handshakes.fetch_add(1, Ordering::SeqCst);
            let records = task_records.clone();
            let service = service_fn(move |req| {
                let records = records.clone();
                async move { Ok::<_, Infallible>(answer(req, records, conn_no).await) }
            });
            serve_by_alpn(tls, service)
        })
        .await;
        Self {
            listener,
            records,
            handshakes,
        }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.listener.addr()
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.addr().port()
    }

    /// Everything received so far.
    pub fn records(&self) -> Vec<Recorded> {
        self.records.lock().expect("records").clone()
    }

    /// TCP connections accepted so far (completed handshakes or not).
    pub fn connections(&self) -> usize {
        self.listener.accepted()
    }

    /// TLS handshakes completed so far.
    pub fn handshakes(&self) -> usize {
        self.handshakes.load(Ordering::SeqCst)
    }
}

type Reply = BoxBody<Bytes, std::convert::Infallible>;

fn full(bytes: Bytes) -> Reply {
    Full::new(bytes).boxed()
}

fn compress(coding: &str, body: &[u8]) -> Vec<u8> {
    match coding {
        "gzip" => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(body).expect("gzip");
            e.finish().expect("gzip")
        }
        "deflate" => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(body).expect("deflate");
            e.finish().expect("deflate")
        }
        "br" => {
            let mut out = Vec::new();
            {
                let mut e = brotli::CompressorWriter::new(&mut out, 4096, 5, 22);
                e.write_all(body).expect("br");
            }
            out
        }
        "zstd" => zstd::encode_all(body, 3).expect("zstd"),
        other => panic!("unknown coding {other}"),
    }
}

async fn answer(
    mut request: Request<Incoming>,
    records: Arc<Mutex<Vec<Recorded>>>,
    conn_no: usize,
) -> Response<Reply> {
    if request.uri().path() == "/ws" && request.headers().contains_key("upgrade") {
        return websocket_echo(&mut request, &records);
    }
    let (parts, body) = request.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    records.lock().expect("records").push(Recorded {
        method: parts.method.clone(),
        uri: parts.uri.clone(),
        version: parts.version,
        headers: parts.headers.clone(),
        body: body.clone(),
    });
    let builder = Response::builder().header("x-upstream-conn", conn_no.to_string());
    let path = parts.uri.path();
    match path {
        "/echo" => builder.body(full(body)),
        "/echo/gzip" | "/echo/br" | "/echo/zstd" | "/echo/deflate" => {
            let coding = &path["/echo/".len()..];
            builder
                .header("content-encoding", coding)
                .body(full(Bytes::from(compress(coding, &body))))
        }
        "/echo/trickle" => {
            let frames = body.iter().map(|b| Bytes::copy_from_slice(&[*b])).collect();
            builder.body(Trickle(frames).boxed())
        }
        "/echo/header" => {
            let text = String::from_utf8_lossy(&body).into_owned();
            builder
                .header("x-echo", text.as_str())
                .header("location", format!("https://elsewhere.test/?t={text}"))
                .header("set-cookie", format!("session={text}; Secure"))
                .body(full(Bytes::from_static(b"ok")))
        }
        "/hold" => builder.body(Held::new().boxed()),
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            builder.body(full(Bytes::from_static(b"slow")))
        }
        "/bomb" => {
            // 8 MiB of zeros, gzip'd to a few KiB.
            builder
                .header("content-encoding", "gzip")
                .body(full(Bytes::from(compress("gzip", &vec![0u8; 8 << 20]))))
        }
        "/encoded/x-unknown" => builder
            .header("content-encoding", "x-unknown")
            .body(full(Bytes::from_static(b"opaque"))),
        _ if path.starts_with("/status/") => {
            let code: u16 = path["/status/".len()..].parse().unwrap_or(500);
            builder
                .status(code)
                .header("x-echo", String::from_utf8_lossy(&body).into_owned())
                .body(full(Bytes::new()))
        }
        _ => builder.body(full(Bytes::from_static(b"ok"))),
    }
    .expect("response")
}

/// `/ws`: records the handshake, answers `101`, then echoes every byte of the upgraded
/// stream back, uppercased (so a test can tell the echo from its own bytes).
fn websocket_echo(
    request: &mut Request<Incoming>,
    records: &Arc<Mutex<Vec<Recorded>>>,
) -> Response<Reply> {
    records.lock().expect("records").push(Recorded {
        method: request.method().clone(),
        uri: request.uri().clone(),
        version: request.version(),
        headers: request.headers().clone(),
        body: Bytes::new(),
    });
    let on_upgrade = hyper::upgrade::on(request);
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let Ok(upgraded) = on_upgrade.await else {
            return;
        };
        let mut io = TokioIo::new(upgraded);
        let mut buf = [0u8; 1024];
        while let Ok(n) = io.read(&mut buf).await {
            if n == 0 || io.write_all(&buf[..n].to_ascii_uppercase()).await.is_err() {
                return;
            }
        }
    });
    Response::builder()
        .status(101)
        .header("connection", "upgrade")
        .header("upgrade", "websocket")
        .body(full(Bytes::new()))
        .expect("101")
}

/// `/hold`: `first`, a pause of [`HOLD`], then `last`: a response whose body is still
/// being read well after its head arrived (no length, so a proxy streams it).
struct Held {
    sent_first: bool,
    pause: std::pin::Pin<Box<tokio::time::Sleep>>,
    done: bool,
}

/// How long `/hold` holds its body back.
pub const HOLD: Duration = Duration::from_millis(1500);

impl Held {
    fn new() -> Self {
        Self {
            sent_first: false,
            pause: Box::pin(tokio::time::sleep(HOLD)),
            done: false,
        }
    }
}

impl http_body::Body for Held {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        use std::future::Future;
        use std::task::Poll;
        if !self.sent_first {
            self.sent_first = true;
            return Poll::Ready(Some(Ok(http_body::Frame::data(Bytes::from_static(
                b"first",
            )))));
        }
        if self.done {
            return Poll::Ready(None);
        }
        match self.pause.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(()) => {
                self.done = true;
                Poll::Ready(Some(Ok(http_body::Frame::data(Bytes::from_static(
                    b"last",
                )))))
            }
        }
    }
}

/// A body that yields its frames one per poll: a value split across 1-byte DATA frames.
struct Trickle(std::collections::VecDeque<Bytes>);

impl http_body::Body for Trickle {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        std::task::Poll::Ready(self.0.pop_front().map(|b| Ok(http_body::Frame::data(b))))
    }
}
