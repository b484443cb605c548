//! The demo's scripted sandbox client: what an agent's HTTP library does behind
//! `HTTPS_PROXY`, spelled out. TCP to sluice, `CONNECT host:port` with the run's proxy
//! credentials, TLS trusting *only* the run CA (so every answer provably came through
//! sluice), then one HTTP/1.1 request.
//!
//! It holds the placeholder and the proxy credentials, never a secret value, and opens
//! connections to the proxy's loopback address only.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode, header};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use zeroize::Zeroizing;

/// Longest CONNECT answer head read before giving up.
const MAX_CONNECT_HEAD: usize = 16 * 1024;

/// How long one request may take, tunnel and handshake included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A response, whole.
#[derive(Debug)]
pub(crate) struct Answer {
    /// Its status.
    pub(crate) status: StatusCode,
    /// Its headers.
    pub(crate) headers: HeaderMap,
    /// Its body.
    pub(crate) body: Bytes,
}

impl Answer {
    /// The body as text (lossy).
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// The sandbox side: the proxy's address and credentials, and the run CA as its only root.
pub(crate) struct Sandbox {
    proxy: SocketAddr,
    proxy_authorization: Zeroizing<String>,
    tls: Arc<ClientConfig>,
}

impl Sandbox {
    /// A client of the proxy at `proxy`, authenticating with the userinfo of `proxy_url`
    /// (`http://USER:TOKEN@HOST:PORT`), trusting only `run_ca_pem`.
    pub(crate) fn new(
        proxy: SocketAddr,
        proxy_url: &str,
        run_ca_pem: &str,
    ) -> Result<Self, String> {
        let userinfo = proxy_url
            .strip_prefix("http://")
            .and_then(|rest| rest.rsplit_once('@'))
            .map(|(userinfo, _)| userinfo)
            .ok_or("the proxy URL has no credentials: expected http://USER:TOKEN@HOST:PORT")?;
        let proxy_authorization = Zeroizing::new(format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(userinfo)
        ));
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(run_ca_pem.as_bytes()) {
            let cert = cert.map_err(|e| format!("run CA PEM: {e}"))?;
            roots
                .add(cert)
                .map_err(|e| format!("run CA certificate: {e}"))?;
        }
        if roots.is_empty() {
            return Err("the run CA PEM holds no certificate: expected the run CA".to_owned());
        }
        let mut tls = ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Sandbox {
            proxy,
            proxy_authorization,
            tls: Arc::new(tls),
        })
    }

    /// `GET https://host:port{path}` through a fresh tunnel, with `Authorization` when
    /// given. Errors say which stage failed (CONNECT, TLS, HTTP) and never hold a value.
    pub(crate) async fn get(
        &self,
        host: &str,
        port: u16,
        path: &str,
        authorization: Option<&str>,
    ) -> Result<Answer, String> {
        tokio::time::timeout(
            REQUEST_TIMEOUT,
            self.get_inner(host, port, path, authorization),
        )
        .await
        .map_err(|_| format!("no answer within {} s", REQUEST_TIMEOUT.as_secs()))?
    }

    async fn get_inner(
        &self,
        host: &str,
        port: u16,
        path: &str,
        authorization: Option<&str>,
    ) -> Result<Answer, String> {
        let authority = format!("{host}:{port}");
        let tcp = self.connect(&authority).await?;
        let name = ServerName::try_from(host.to_owned())
            .map_err(|e| format!("{host} is not a TLS server name: {e}"))?;
        let tls = TlsConnector::from(self.tls.clone())
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS handshake with sluice for {host}: {e}"))?;
        let (mut send, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| format!("HTTP/1.1 handshake: {e}"))?;
        let driver = tokio::spawn(connection);
        let mut request = Request::get(path)
            .header(header::HOST, &authority)
            .header(header::USER_AGENT, "sluice-demo-sandbox");
        if let Some(value) = authorization {
            request = request.header(header::AUTHORIZATION, value);
        }
        let request = request
            .body(Empty::<Bytes>::new())
            .map_err(|e| format!("building the request: {e}"))?;
        let response = send
            .send_request(request)
            .await
            .map_err(|e| format!("sending GET {path}: {e}"))?;
        let (parts, body) = response.into_parts();
        let body = body
            .collect()
            .await
            .map_err(|e| format!("reading the body of GET {path}: {e}"))?
            .to_bytes();
        driver.abort();
        Ok(Answer {
            status: parts.status,
            headers: parts.headers,
            body,
        })
    }

    /// Opens the tunnel: `CONNECT authority` with the run's credentials; the stream once
    /// sluice answered `200`.
    async fn connect(&self, authority: &str) -> Result<TcpStream, String> {
        let mut tcp = TcpStream::connect(self.proxy)
            .await
            .map_err(|e| format!("connecting to sluice at {}: {e}", self.proxy))?;
        let head = Zeroizing::new(format!(
            "CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\nProxy-Authorization: {}\r\n\r\n",
            self.proxy_authorization.as_str()
        ));
        tcp.write_all(head.as_bytes())
            .await
            .map_err(|e| format!("sending CONNECT {authority}: {e}"))?;
        // Byte by byte: nothing after the head may be consumed, it belongs to TLS.
        let mut received = Vec::new();
        let mut byte = [0u8; 1];
        while !received.ends_with(b"\r\n\r\n") {
            if received.len() >= MAX_CONNECT_HEAD {
                return Err(format!(
                    "CONNECT {authority}: answer head over {MAX_CONNECT_HEAD} bytes"
                ));
            }
            match tcp.read(&mut byte).await {
                Ok(1) => received.push(byte[0]),
                Ok(_) => return Err(format!("CONNECT {authority}: sluice closed the connection")),
                Err(e) => return Err(format!("CONNECT {authority}: {e}")),
            }
        }
        let head = String::from_utf8_lossy(&received);
        let status_line = head.lines().next().unwrap_or_default();
        if status_line.split_whitespace().nth(1) == Some("200") {
            Ok(tcp)
        } else {
            Err(format!(
                "CONNECT {authority} answered `{status_line}`: expected 200"
            ))
        }
    }
}
