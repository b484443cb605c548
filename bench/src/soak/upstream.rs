//! The soak's faulty, recording TLS upstream, in the harness's own process: it answers
//! normally, resets mid-body, stalls before the head or inside the body, echoes the secret
//! value; and a second listener that fails every handshake (its certificate names another
//! host). It records where the real value ever arrived, so the soak can tell a swap from a
//! leak.
//!
//! The value may arrive in exactly one place: the `Authorization` header, as
//! `Bearer VALUE`, of a request toward the granted host (TLS SNI and `Host` both naming
//! it). Anywhere else (method, target, another header, a body, another host) is a leak.
//! Both listeners are on 127.0.0.1 and never anywhere else.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use super::body::{self, SoakBody, StreamScan};
use super::minted::{self, Endpoint};
use super::values::{Bearer, Values};
use crate::error::BenchError;
use crate::listen::accept_tls;
use crate::pki;

/// The host the secret is granted to.
pub(crate) const GRANTED_HOST: &str = "granted.soak.test";
/// The header the client stamps each request with: when its tunnel was opened, in ms.
pub(crate) const TUNNEL_HEADER: &str = "x-soak-tunnel-ms";
/// A host sluice may reach, that the secret does not grant.
pub(crate) const UNGRANTED_HOST: &str = "ungranted.soak.test";
/// A host whose upstream presents a certificate for another name.
pub(crate) const BAD_TLS_HOST: &str = "badtls.soak.test";
/// The name the bad-TLS upstream's certificate holds instead.
const ELSEWHERE_HOST: &str = "elsewhere.soak.test";

/// Size of `/stream` (and of what `/reset` announces).
pub(crate) const STREAM_BYTES: usize = 256 * 1024;
/// Size of each chunk the upstream sends.
const CHUNK: usize = 16 * 1024;
/// What `/ok` answers.
pub(crate) const OK_BODY: &[u8] = b"{\"status\":\"ok\",\"items\":[1,2,3]}\n";
/// The path of requests sluice must refuse; one that arrives is counted.
pub(crate) const REFUSED_PATH: &str = "/must-be-refused";
/// The WebSocket that answers each message with every value sluice has been given.
pub(crate) const WS_PATH: &str = "/ws";
/// The most leak descriptions kept (all are counted).
const KEPT_LEAKS: usize = 20;

/// What the upstream saw, shared with the soak.
#[derive(Default)]
pub(crate) struct Record {
    /// Requests received (on the good listener).
    pub(crate) requests: AtomicU64,
    /// Requests that carried the real value in the granted place (a swap).
    pub(crate) swaps: AtomicU64,
    /// Requests that sluice should have refused, which arrived nonetheless.
    pub(crate) refused_arrived: AtomicU64,
    /// Swaps of a retired value on a tunnel opened after a later value was in force.
    pub(crate) stale_swaps: AtomicU64,
    /// Swaps of a retired value on a tunnel opened before (its old declaration's own).
    pub(crate) retired_swaps: AtomicU64,
    /// Connections to the bad-TLS listener, and handshakes that completed there.
    pub(crate) bad_tls_attempts: AtomicU64,
    /// Handshakes the bad-TLS listener completed (sluice must abort each).
    pub(crate) bad_tls_handshakes: AtomicU64,
    /// WebSocket handshakes answered (`/ws`).
    pub(crate) websockets: AtomicU64,
    /// Leaks: how many, and the first few described (never with the value).
    pub(crate) leak_count: AtomicU64,
    /// The first few leaks, described.
    pub(crate) leaks: Mutex<Vec<String>>,
}

impl Record {
    fn leak(&self, what: String) {
        self.leak_count.fetch_add(1, Ordering::Relaxed);
        let mut leaks = self.leaks.lock().unwrap_or_else(|e| e.into_inner());
        if leaks.len() < KEPT_LEAKS {
            leaks.push(what);
        }
    }
}

/// The two running listeners.
pub(crate) struct Upstreams {
    /// The normal (and faulty) upstream, for the granted and the ungranted host.
    pub(crate) good: SocketAddr,
    /// The upstream whose certificate names another host.
    pub(crate) bad_tls: SocketAddr,
    /// What they saw.
    pub(crate) record: Arc<Record>,
}

struct State {
    values: Arc<Values>,
    record: Arc<Record>,
    /// The token endpoint and the API path behind it, with `--mint-lifetime`.
    minted: Option<Arc<Endpoint>>,
}

/// Mints a CA (its certificate written to `ca_path`), starts both listeners on 127.0.0.1.
pub(crate) async fn start(
    ca_path: &Path,
    values: Arc<Values>,
    minted: Option<Arc<Endpoint>>,
) -> Result<Upstreams, BenchError> {
    let (good_config, bad_config) = server_configs(ca_path)?;
    let bind = || async {
        TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| BenchError::peer("soak upstream", format!("bind: {e}")))
    };
    let good_listener = bind().await?;
    let bad_listener = bind().await?;
    let addr = |l: &TcpListener| {
        l.local_addr()
            .map_err(|e| BenchError::peer("soak upstream", e))
    };
    let upstreams = Upstreams {
        good: addr(&good_listener)?,
        bad_tls: addr(&bad_listener)?,
        record: Arc::new(Record::default()),
    };
    let state = Arc::new(State {
        values,
        record: upstreams.record.clone(),
        minted,
    });
    tokio::spawn(accept_tls(
        good_listener,
        TlsAcceptor::from(good_config),
        move |tls| {
            let sni: Arc<str> = tls.get_ref().1.server_name().unwrap_or("").into();
            let state = state.clone();
            service_fn(move |request| {
                let state = state.clone();
                let sni = sni.clone();
                async move { Ok::<_, Infallible>(serve(request, &sni, &state).await) }
            })
        },
    ));
    tokio::spawn(accept_bad(
        bad_listener,
        TlsAcceptor::from(bad_config),
        upstreams.record.clone(),
    ));
    Ok(upstreams)
}

/// The good listener's configuration (a leaf for the granted and ungranted hosts) and the
/// bad one's (a leaf from the same CA for another name).
fn server_configs(ca_path: &Path) -> Result<(Arc<ServerConfig>, Arc<ServerConfig>), BenchError> {
    let issuer = pki::mint_ca(ca_path, "sluice soak upstream CA")?;
    let alpn: &[&[u8]] = &[b"h2", b"http/1.1"];
    Ok((
        pki::server_config(&issuer, &[GRANTED_HOST, UNGRANTED_HOST], alpn)?,
        pki::server_config(&issuer, &[ELSEWHERE_HOST], alpn)?,
    ))
}

async fn accept_bad(listener: TcpListener, acceptor: TlsAcceptor, record: Arc<Record>) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        record.bad_tls_attempts.fetch_add(1, Ordering::Relaxed);
        let acceptor = acceptor.clone();
        let record = record.clone();
        tokio::spawn(async move {
            let handshake = tokio::time::timeout(Duration::from_secs(30), acceptor.accept(tcp));
            if let Ok(Ok(_tls)) = handshake.await {
                record.bad_tls_handshakes.fetch_add(1, Ordering::Relaxed);
            }
        });
    }
}

/// The request's host, from `Host` or the `:authority`, without its port.
fn request_host(parts: &http::request::Parts) -> String {
    let authority = parts
        .headers
        .get(http::header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| parts.uri.authority().map(|a| a.as_str().to_owned()))
        .unwrap_or_default();
    match authority.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host.to_owned(),
        _ => authority,
    }
    .to_ascii_lowercase()
}

async fn serve(request: Request<Incoming>, sni: &str, state: &State) -> Response<SoakBody> {
    let record = &state.record;
    record.requests.fetch_add(1, Ordering::Relaxed);
    if request.uri().path() == WS_PATH {
        return websocket(request, state);
    }
    let (parts, incoming) = request.into_parts();
    let host = request_host(&parts);
    let snapshot = state.values.snapshot();
    let values = snapshot.all;
    let any = |bytes: &[u8]| values.iter().any(|v| body::contains(bytes, v));
    let granted = sni == GRANTED_HOST && host == GRANTED_HOST;
    // When the client opened the tunnel this came through (a value retired before then
    // must not be swapped into it).
    let tunnel_ms = parts
        .headers
        .get(TUNNEL_HEADER)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let path = parts.uri.path().to_owned();
    let place = format!("{} {path} (SNI {sni:?}, host {host:?})", parts.method);
    // Where the real value arrived: only `Authorization: Bearer VALUE` toward the granted
    // host is a swap; everything else is a leak.
    if any(parts.method.as_str().as_bytes()) {
        record.leak(format!("{place}: the value in the method"));
    }
    if any(parts.uri.to_string().as_bytes()) {
        record.leak(format!("{place}: the value in the target"));
    }
    let mut bearer = Bearer::Other;
    for (name, header) in &parts.headers {
        if any(name.as_str().as_bytes()) {
            record.leak(format!("{place}: the value in a header name"));
        }
        if !any(header.as_bytes()) {
            continue;
        }
        let token = header.as_bytes().strip_prefix(b"Bearer ");
        let seen = token.map_or(Bearer::Other, |t| state.values.bearer(t, tunnel_ms));
        if granted && name == http::header::AUTHORIZATION && seen != Bearer::Other {
            record.swaps.fetch_add(1, Ordering::Relaxed);
            if token != values.last().map(Vec::as_slice) {
                record.retired_swaps.fetch_add(1, Ordering::Relaxed);
            }
            if seen == Bearer::Stale {
                record.stale_swaps.fetch_add(1, Ordering::Relaxed);
            }
            bearer = seen;
        } else {
            record.leak(format!("{place}: the value in header {name}"));
        }
    }
    // The body, scanned as it streams (an upload is 256 KiB).
    let mut scans: Vec<StreamScan> = values.iter().map(|v| StreamScan::new(v)).collect();
    let mut received = 0u64;
    // A token request's form, kept (small) for the endpoint.
    let mut form = Vec::new();
    let mut incoming = incoming;
    while let Some(frame) = incoming.frame().await {
        let Ok(frame) = frame else { break };
        if let Ok(data) = frame.into_data() {
            received += data.len() as u64;
            scans.iter_mut().for_each(|scan| scan.push(&data));
            if path == minted::TOKEN_PATH && form.len() < 64 * 1024 {
                form.extend_from_slice(&data);
            }
        }
    }
    if scans.iter().any(StreamScan::found) {
        record.leak(format!("{place}: the value in the body"));
    }
    if path == REFUSED_PATH {
        record.refused_arrived.fetch_add(1, Ordering::Relaxed);
    }
    let auth_seen = match (parts.headers.get(http::header::AUTHORIZATION), bearer) {
        (Some(_), Bearer::Real | Bearer::Stale) => "real",
        (Some(_), Bearer::Other) => "other",
        (None, _) => "absent",
    };
    // Any of the values sluice has, in turn: a retired one must be redacted as surely as
    // the current (one still on its way to sluice cannot be, and is not echoed).
    let echoed = values
        [record.requests.load(Ordering::Relaxed) as usize % snapshot.known_to_sluice.max(1)]
    .clone();
    let stall = query_ms(parts.uri.query()).unwrap_or(0);
    let authorization = parts.headers.get(http::header::AUTHORIZATION);
    let mut response = match (path.as_str(), &state.minted) {
        (minted::TOKEN_PATH, Some(endpoint)) => endpoint.token(authorization, &form),
        (minted::MINTED_PATH, Some(endpoint)) => endpoint.api(authorization),
        (path, _) => canned(path, received, &echoed, stall).await,
    };
    response
        .headers_mut()
        .insert("x-soak-auth", HeaderValue::from_static(auth_seen));
    response
}

/// The answers of the paths that need no state: `/ok`, `/stream`, `/upload`, `/echo`,
/// the resets and stalls; `404` for anything else.
async fn canned(path: &str, received: u64, echoed: &[u8], stall: u64) -> Response<SoakBody> {
    match path {
        "/ok" => Response::new(body::full(OK_BODY)),
        "/stream" => Response::new(fed(None, move |feed| async move {
            for _ in 0..STREAM_BYTES / CHUNK {
                feed.send(Ok(filler(CHUNK))).await.ok()?;
            }
            Some(())
        })),
        "/upload" => Response::new(body::full(format!("received {received}\n"))),
        "/echo" => echo(echoed),
        "/reset" => Response::new(fed(Some(STREAM_BYTES as u64), |feed| async move {
            feed.send(Ok(filler(CHUNK))).await.ok()?;
            // The upstream gives up mid-body: hyper closes the connection (HTTP/1.1) or
            // resets the stream (HTTP/2).
            feed.send(Err("upstream reset mid-body".into())).await.ok()
        })),
        "/stall-head" => {
            tokio::time::sleep(Duration::from_millis(stall)).await;
            Response::new(body::full(OK_BODY))
        }
        "/stall-body" => Response::new(fed(None, move |feed| async move {
            feed.send(Ok(filler(CHUNK))).await.ok()?;
            tokio::time::sleep(Duration::from_millis(stall)).await;
            feed.send(Ok(filler(CHUNK))).await.ok()
        })),
        _ => {
            let mut response = Response::new(body::empty());
            *response.status_mut() = StatusCode::NOT_FOUND;
            response
        }
    }
}

/// `ms=N` from a query.
fn query_ms(query: Option<&str>) -> Option<u64> {
    query?
        .split('&')
        .find_map(|pair| pair.strip_prefix("ms="))?
        .parse()
        .ok()
}

/// A body a spawned task feeds; the task ends when the client goes away.
fn fed<F, Fut>(exact: Option<u64>, feeder: F) -> SoakBody
where
    F: FnOnce(body::Feed) -> Fut,
    Fut: std::future::Future<Output = Option<()>> + Send + 'static,
{
    let (feed, body) = body::channel(exact);
    tokio::spawn(feeder(feed));
    body
}

/// `len` bytes of filler.
fn filler(len: usize) -> Bytes {
    let line = b"sluice soak filler: the quick brown fox jumps over the lazy dog 0123456789\n";
    line.iter()
        .copied()
        .cycle()
        .take(len)
        .collect::<Vec<u8>>()
        .into()
}

/// `/ws`: a WebSocket on which every message the client sends is answered with every value
/// sluice has been given (current and retired), which sluice must redact on the way back;
/// a request that is not a WebSocket handshake gets `400`.
fn websocket(mut request: Request<Incoming>, state: &State) -> Response<SoakBody> {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::{Message, handshake::derive_accept_key, protocol::Role};
    let Some(key) = request.headers().get("sec-websocket-key") else {
        let mut refused = Response::new(body::full("not a WebSocket handshake\n"));
        *refused.status_mut() = StatusCode::BAD_REQUEST;
        return refused;
    };
    state.record.websockets.fetch_add(1, Ordering::Relaxed);
    // Its handshake carried the placeholder in `Authorization`, swapped like any request's.
    let snapshot = state.values.snapshot();
    let bearer = request.headers().get(http::header::AUTHORIZATION);
    if bearer.is_some_and(|b| snapshot.all.iter().any(|v| body::contains(b.as_bytes(), v))) {
        state.record.swaps.fetch_add(1, Ordering::Relaxed);
    }
    let accept = derive_accept_key(key.as_bytes());
    let on_upgrade = hyper::upgrade::on(&mut request);
    let values = state.values.clone();
    tokio::spawn(async move {
        let Ok(upgraded) = on_upgrade.await else {
            return;
        };
        let mut ws = tokio_tungstenite::WebSocketStream::from_raw_socket(
            TokioIo::new(upgraded),
            Role::Server,
            None,
        )
        .await;
        while let Some(Ok(message)) = ws.next().await {
            match message {
                Message::Text(_) | Message::Binary(_) => {}
                Message::Close(_) => break,
                _ => continue,
            }
            let snapshot = values.snapshot();
            let known = &snapshot.all[..snapshot.known_to_sluice];
            let text: Vec<String> = known
                .iter()
                .map(|v| String::from_utf8_lossy(v).into_owned())
                .collect();
            let reply = Message::text(format!("values: {}", text.join(" ")));
            if ws.send(reply).await.is_err() {
                return;
            }
        }
        let _ = ws.close(None).await;
    });
    let mut response = Response::new(body::empty());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONNECTION,
        HeaderValue::from_static("upgrade"),
    );
    headers.insert(http::header::UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(accept) = HeaderValue::from_str(&accept) {
        headers.insert(http::header::SEC_WEBSOCKET_ACCEPT, accept);
    }
    response
}

/// The value in two response headers and, split across chunks, three times in the body:
/// raw, in JSON, and in a query string.
fn echo(value: &[u8]) -> Response<SoakBody> {
    let text = String::from_utf8_lossy(value).into_owned();
    let body_text =
        format!("token={text}\n{{\"token\":\"{text}\"}}\nhttps://x.test/?t={text}&u=1\n");
    let bytes = Bytes::from(body_text.into_bytes());
    let response_body = fed(None, move |feed| async move {
        // Three-byte chunks: every value is split across several.
        let mut at = 0;
        while at < bytes.len() {
            let end = (at + 3).min(bytes.len());
            feed.send(Ok(bytes.slice(at..end))).await.ok()?;
            at = end;
        }
        Some(())
    });
    let mut response = Response::new(response_body);
    if let Ok(header) = HeaderValue::from_str(&text) {
        response.headers_mut().insert("x-soak-echo", header);
    }
    if let Ok(cookie) = HeaderValue::from_str(&format!("t={text}; Path=/")) {
        response
            .headers_mut()
            .insert(http::header::SET_COOKIE, cookie);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stalls_are_read_from_the_query() {
        assert_eq!(query_ms(Some("ms=250")), Some(250));
        assert_eq!(query_ms(Some("a=1&ms=20000")), Some(20000));
        assert_eq!(query_ms(Some("a=1")), None);
        assert_eq!(query_ms(None), None);
    }
}
