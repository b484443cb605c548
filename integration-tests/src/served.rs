//! A TLS upstream on 127.0.0.1 whose answers a test writes: a function from the request
//! (recorded whole, like [`crate::RecordingUpstream`]) to a response. The purpose-built
//! upstreams of the client tests (a git smart-HTTP server, a package index, an npm
//! registry) are such functions.
//!
//! The function runs on a blocking thread, so it may run a CGI program or read files.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;

use crate::listen::{TlsListener, serve_by_alpn};
use crate::pki::TestPki;
use crate::upstream::Recorded;

/// The function that answers each request.
pub type Handler = dyn Fn(&Recorded) -> Response<Bytes> + Send + Sync + 'static;

/// The running upstream.
pub struct ServedUpstream {
    listener: TlsListener,
    records: Arc<Mutex<Vec<Recorded>>>,
}

impl ServedUpstream {
    /// Starts an upstream serving `names` (certificate from `pki`, ALPN `h2` and
    /// `http/1.1`), answering with `handler`.
    pub async fn start<F>(pki: &TestPki, names: &[&str], handler: F) -> Self
    where
        F: Fn(&Recorded) -> Response<Bytes> + Send + Sync + 'static,
    {
        let config = pki.server_config(names, &[b"h2", b"http/1.1"]);
        let records = Arc::new(Mutex::new(Vec::new()));
        let handler: Arc<Handler> = Arc::new(handler);
        let task_records = records.clone();
        let listener = TlsListener::start(config, move |tls, _| {
            let records = task_records.clone();
            let handler = handler.clone();
            let service = service_fn(move |req| {
                let records = records.clone();
                let handler = handler.clone();
                async move { Ok::<_, Infallible>(answer(req, records, handler).await) }
            });
            serve_by_alpn(tls, service)
        })
        .await;
        Self { listener, records }
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.listener.addr().port()
    }

    /// Everything received so far.
    pub fn records(&self) -> Vec<Recorded> {
        self.records.lock().expect("records").clone()
    }
}

async fn answer(
    request: Request<Incoming>,
    records: Arc<Mutex<Vec<Recorded>>>,
    handler: Arc<Handler>,
) -> Response<Full<Bytes>> {
    let (parts, body) = request.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let recorded = Recorded {
        method: parts.method,
        uri: parts.uri,
        version: parts.version,
        headers: parts.headers,
        body,
    };
    records.lock().expect("records").push(recorded.clone());
    let response = tokio::task::spawn_blocking(move || handler(&recorded))
        .await
        .unwrap_or_else(|_| {
            Response::builder()
                .status(500)
                .body(Bytes::from_static(b"the test handler panicked"))
                .expect("response")
        });
    response.map(Full::new)
}

/// The user and password of a request's `Authorization: Basic` header, if it has one.
pub fn basic_credentials(record: &Recorded) -> Option<(String, String)> {
    use base64::Engine;
    let value = record.headers.get("authorization")?.to_str().ok()?;
    let encoded = value.strip_prefix("Basic ")?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

/// A plain response with `status`, `content-type` and `body`.
pub fn respond(status: u16, content_type: &str, body: impl Into<Bytes>) -> Response<Bytes> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(body.into())
        .expect("response")
}
