//! The demo's stand-in API: `api.demo.test` and `other.demo.test`, served over TLS (HTTP/1.1
//! and HTTP/2) on 127.0.0.1 with a certificate from the demo's own in-memory test CA, and
//! recording what reached it.
//!
//! It plays the real service behind a credential: it knows the real token (as the service
//! that issued it would), accepts it on `GET /v1/whoami`, and leaks it back on
//! `GET /v1/token` — the echo the demo shows sluice redacting. It never logs or prints the
//! token, and what it records about a request holds the token's *presence*, never the token.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::ServerConfig;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use zeroize::Zeroizing;

/// The demo API's test CA (standing in for the web PKI) and the server configuration of a
/// leaf it signed for the API's names. The CA's key lives only in this value's memory.
pub(crate) struct ApiPki {
    ca_pem: String,
    server: Arc<ServerConfig>,
}

impl ApiPki {
    /// A fresh test CA and a leaf for `names`, offering `h2` and `http/1.1`.
    pub(crate) fn mint(names: &[&str]) -> Result<ApiPki, String> {
        let mut params =
            CertificateParams::new(Vec::<String>::new()).map_err(|e| format!("CA params: {e}"))?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "sluice demo API test CA");
        let ca_key = KeyPair::generate().map_err(|e| format!("CA key: {e}"))?;
        let issuer = CertifiedIssuer::self_signed(params, ca_key)
            .map_err(|e| format!("self-signing the CA: {e}"))?;
        let leaf_params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .map_err(|e| format!("leaf params: {e}"))?;
        let leaf_key = KeyPair::generate().map_err(|e| format!("leaf key: {e}"))?;
        let leaf = leaf_params
            .signed_by(&leaf_key, &issuer)
            .map_err(|e| format!("signing the leaf: {e}"))?;
        let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der()));
        let mut server = ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(vec![CertificateDer::from(leaf.der().to_vec())], key_der)
            .map_err(|e| format!("server TLS configuration: {e}"))?;
        server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(ApiPki {
            ca_pem: issuer.pem(),
            server: Arc::new(server),
        })
    }

    /// The test CA's certificate, PEM: what sluice is given as an upstream root.
    pub(crate) fn ca_pem(&self) -> &str {
        &self.ca_pem
    }
}

/// What a request's `Authorization` header held, as the API judged it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Received {
    /// No `Authorization` header.
    Nothing,
    /// Exactly `Bearer <the real token>`.
    RealToken,
    /// Something holding the real token, but not in the expected form.
    TokenInAnotherForm,
    /// Something else, as it arrived (it does not hold the real token, so it may be shown).
    Other(String),
}

impl Received {
    /// How the API describes it in its answers.
    pub(crate) fn describe(&self, token_len: usize) -> String {
        match self {
            Received::Nothing => "no Authorization header".to_owned(),
            Received::RealToken => format!("the real token ({token_len} characters)"),
            Received::TokenInAnotherForm => "the real token, in an unexpected form".to_owned(),
            Received::Other(text) => text.clone(),
        }
    }
}

/// One request as it reached the API.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    /// The host the request named (without port).
    pub(crate) host: String,
    /// The path.
    pub(crate) path: String,
    /// What its `Authorization` header held.
    pub(crate) authorization: Received,
}

/// The running API. Dropping it stops accepting.
pub(crate) struct Api {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    accept_task: JoinHandle<()>,
}

impl Api {
    /// Starts the API on 127.0.0.1 (a free port), knowing `token` as the one it accepts.
    pub(crate) async fn start(
        pki: &ApiPki,
        token: Arc<Zeroizing<String>>,
    ) -> Result<Api, std::io::Error> {
        let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let acceptor = TlsAcceptor::from(pki.server.clone());
        let accept_task = tokio::spawn(accept(listener, acceptor, token, seen.clone()));
        Ok(Api {
            addr,
            seen,
            accept_task,
        })
    }

    /// The port it listens on.
    pub(crate) fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The address it listens on.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request that reached it so far.
    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Drop for Api {
    fn drop(&mut self) {
        self.accept_task.abort();
    }
}

async fn accept(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    token: Arc<Zeroizing<String>>,
    seen: Arc<Mutex<Vec<Seen>>>,
) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            return;
        };
        let acceptor = acceptor.clone();
        let token = token.clone();
        let seen = seen.clone();
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let is_h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
            let service = service_fn(move |request| {
                let answer = answer(&request, &token, &seen);
                async move { Ok::<_, Infallible>(answer) }
            });
            let io = TokioIo::new(tls);
            // A connection that fails midway only ends that connection; the demo's checks
            // notice what did not arrive.
            if is_h2 {
                let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                    .serve_connection(io, service)
                    .await;
            } else {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            }
        });
    }
}

/// The API's routes: `/v1/whoami` (200 with the real token, 401 otherwise, saying what it
/// received), `/v1/token` (leaks the real token back), anything else 404.
fn answer(
    request: &Request<Incoming>,
    token: &Zeroizing<String>,
    seen: &Mutex<Vec<Seen>>,
) -> Response<Full<Bytes>> {
    let authorization = judge(request.headers().get(header::AUTHORIZATION), token);
    let path = request.uri().path().to_owned();
    seen.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(Seen {
            host: requested_host(request),
            path: path.clone(),
            authorization: authorization.clone(),
        });
    let received = authorization.describe(token.len());
    let (status, body) = match path.as_str() {
        "/v1/whoami" if authorization == Received::RealToken => (
            StatusCode::OK,
            serde_json::json!({ "user": "demo", "received": received }),
        ),
        "/v1/whoami" => (
            StatusCode::UNAUTHORIZED,
            serde_json::json!({ "error": "unauthorized", "received": received }),
        ),
        "/v1/token" => (
            StatusCode::OK,
            serde_json::json!({ "token": token.as_str(), "expires_in": 3600 }),
        ),
        _ => (
            StatusCode::NOT_FOUND,
            serde_json::json!({ "error": "no such endpoint" }),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

fn judge(value: Option<&http::HeaderValue>, token: &str) -> Received {
    let Some(value) = value else {
        return Received::Nothing;
    };
    let text = String::from_utf8_lossy(value.as_bytes());
    match text.strip_prefix("Bearer ") {
        Some(rest) if rest == token => Received::RealToken,
        _ if text.contains(token) => Received::TokenInAnotherForm,
        _ => Received::Other(text.into_owned()),
    }
}

/// The host a request names: its `:authority` (HTTP/2) or `Host` (HTTP/1.1), without port.
fn requested_host(request: &Request<Incoming>) -> String {
    let named = request.uri().host().map(str::to_owned).or_else(|| {
        request
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .map(|h| h.rsplit_once(':').map_or(h, |(host, _)| host).to_owned())
    });
    named.unwrap_or_default().to_ascii_lowercase()
}
