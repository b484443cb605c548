//! Clients that go through the proxy: curl as a sandbox would run it, and a Rust client
//! that opens a CONNECT tunnel by hand so a test controls every header and frame.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// What curl printed.
#[derive(Debug)]
pub struct CurlOutput {
    /// The HTTP status of the last response (`000` when none).
    pub status: u16,
    /// The response body.
    pub body: String,
    /// curl's stderr (verbose output when asked).
    pub stderr: String,
    /// curl's exit code.
    pub code: Option<i32>,
}

/// curl, configured as `sluice run` would configure a sandbox: proxy URL and CA bundle.
pub struct Curl<'a> {
    proxy_url: String,
    ca: &'a Path,
    args: Vec<String>,
}

impl<'a> Curl<'a> {
    /// curl through `proxy_url`, trusting `ca`.
    pub fn new(proxy_url: &str, ca: &'a Path) -> Self {
        Self {
            proxy_url: proxy_url.to_owned(),
            ca,
            args: Vec::new(),
        }
    }

    /// Adds arguments.
    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Runs curl against `url` (blocking; call from `spawn_blocking` in async tests).
    pub fn get(&self, url: &str) -> CurlOutput {
        let out = Command::new("curl")
            .arg("-sS")
            .arg("--max-time")
            .arg("20")
            .arg("--proxy")
            .arg(&self.proxy_url)
            .arg("--cacert")
            .arg(self.ca)
            .arg("--noproxy")
            .arg("")
            .arg("-w")
            .arg("\n%{http_code}")
            .args(&self.args)
            .arg(url)
            .env_remove("HTTPS_PROXY")
            .env_remove("https_proxy")
            .env_remove("HTTP_PROXY")
            .env_remove("http_proxy")
            .env_remove("ALL_PROXY")
            .env_remove("all_proxy")
            .output()
            .expect("curl must be installed (.ci/run installs it)");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, status) = stdout.rsplit_once('\n').unwrap_or(("", stdout.as_str()));
        CurlOutput {
            status: status.trim().parse().unwrap_or(0),
            body: body.to_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            code: out.status.code(),
        }
    }
}

/// A client tunnel through the proxy: CONNECT, then TLS trusting the run CA, then HTTP/1.1
/// or HTTP/2 as ALPN picks.
pub enum TunnelClient {
    /// HTTP/1.1.
    H1(http1::SendRequest<Full<Bytes>>),
    /// HTTP/2.
    H2(http2::SendRequest<Full<Bytes>>),
}

/// The answer to a CONNECT that was not `200`.
#[derive(Debug)]
pub struct ConnectRefused {
    /// The status line and headers as received.
    pub head: String,
}

impl ConnectRefused {
    /// The status code.
    pub fn status(&self) -> u16 {
        self.head
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    }
}

/// Sends `CONNECT authority` with `proxy_auth` (a full header value, or none) and returns
/// the raw stream once the proxy answered `200`.
pub async fn connect(
    proxy: std::net::SocketAddr,
    authority: &str,
    proxy_auth: Option<&str>,
) -> Result<TcpStream, ConnectRefused> {
    // A proxy that is gone (stopped mid-load) is a refusal too, with no head.
    let mut tcp = TcpStream::connect(proxy)
        .await
        .map_err(|e| ConnectRefused {
            head: format!("(no connection to the proxy: {e})"),
        })?;
    let mut head = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n");
    if let Some(auth) = proxy_auth {
        head.push_str(&format!("Proxy-Authorization: {auth}\r\n"));
    }
    head.push_str("\r\n");
    tcp.write_all(head.as_bytes())
        .await
        .map_err(|e| ConnectRefused {
            head: format!("(CONNECT not sent: {e})"),
        })?;
    let mut received = Vec::new();
    let mut byte = [0u8; 1];
    while !received.ends_with(b"\r\n\r\n") {
        match tcp.read(&mut byte).await {
            Ok(1) => received.push(byte[0]),
            _ => break,
        }
    }
    let head = String::from_utf8_lossy(&received).into_owned();
    if head.starts_with("HTTP/1.1 200") {
        Ok(tcp)
    } else {
        Err(ConnectRefused { head })
    }
}

/// The `Proxy-Authorization` value for a proxy URL `http://user:token@host:port`.
pub fn basic_auth(proxy_url: &str) -> String {
    use base64::Engine;
    let rest = proxy_url.trim_start_matches("http://");
    let userinfo = rest.split('@').next().unwrap_or_default();
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(userinfo)
    )
}

/// A CONNECT tunnel through the proxy with TLS (SNI `sni`, trusting `ca_pem`, offering
/// `alpn`) established inside it.
pub async fn tls_tunnel(
    proxy: std::net::SocketAddr,
    proxy_url: &str,
    authority: &str,
    sni: &str,
    ca_pem: &Path,
    alpn: &[&[u8]],
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, String> {
    let tcp = connect(proxy, authority, Some(&basic_auth(proxy_url)))
        .await
        .map_err(|r| format!("CONNECT refused: {}", r.head))?;
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca_pem).expect("ca pem") {
        roots.add(cert.expect("ca cert")).expect("add root");
    }
    let mut config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let name = ServerName::try_from(sni.to_owned()).expect("server name");
    TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS: {e}"))
}

/// Where a proxy listens, its URL with credentials, and its CA: an in-process
/// [`crate::TestProxy`] (`TestProxy::at`) or a `sluice serve` child.
#[derive(Clone, Debug)]
pub struct ProxyAt {
    /// The listening address.
    pub addr: std::net::SocketAddr,
    /// `http://user:token@host:port`.
    pub url: String,
    /// The run CA, PEM file.
    pub ca: std::path::PathBuf,
}

impl ProxyAt {
    /// A CONNECT tunnel to `authority` with TLS (SNI `sni`, offering `alpn`) inside it.
    pub async fn tls_tunnel(
        &self,
        authority: &str,
        sni: &str,
        alpn: &[&[u8]],
    ) -> Result<tokio_rustls::client::TlsStream<TcpStream>, String> {
        tls_tunnel(self.addr, &self.url, authority, sni, &self.ca, alpn).await
    }

    /// A TLS tunnel to `host:port` with SNI `host`, offering `alpn`.
    pub async fn tunnel_to(
        &self,
        host: &str,
        port: u16,
        alpn: &[&[u8]],
    ) -> Result<tokio_rustls::client::TlsStream<TcpStream>, String> {
        self.tls_tunnel(&format!("{host}:{port}"), host, alpn).await
    }

    /// One HTTP/1.1 GET of `path` on `host:port` with `Authorization: Bearer {token}`, on
    /// a tunnel of its own (so that it is served under the declaration in force when it
    /// connects): the status and the body, or why there was no answer.
    pub async fn bearer_get(
        &self,
        host: &str,
        port: u16,
        path: &str,
        token: &str,
    ) -> Result<(u16, String), String> {
        let mut client = self
            .open(&format!("{host}:{port}"), host, &[b"http/1.1"])
            .await?;
        let request = Request::get(format!("https://{host}:{port}{path}"))
            .header("host", format!("{host}:{port}"))
            .header("authorization", format!("Bearer {token}"))
            .body(Full::new(Bytes::new()))
            .map_err(|e| e.to_string())?;
        let response = client.send(request).await?;
        Ok((
            response.status().as_u16(),
            String::from_utf8_lossy(response.body()).into_owned(),
        ))
    }

    /// [`TunnelClient::open`] through this proxy.
    pub async fn open(
        &self,
        authority: &str,
        sni: &str,
        alpn: &[&[u8]],
    ) -> Result<TunnelClient, String> {
        TunnelClient::open(self.addr, &self.url, authority, sni, &self.ca, alpn).await
    }
}

impl TunnelClient {
    /// Opens a tunnel to `authority` through the proxy, TLS with `sni`, offering `alpn`.
    pub async fn open(
        proxy: std::net::SocketAddr,
        proxy_url: &str,
        authority: &str,
        sni: &str,
        ca_pem: &Path,
        alpn: &[&[u8]],
    ) -> Result<Self, String> {
        let tls = tls_tunnel(proxy, proxy_url, authority, sni, ca_pem, alpn).await?;
        let is_h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
        let io = TokioIo::new(tls);
        if is_h2 {
            let (send, conn) = http2::handshake(TokioExecutor::new(), io)
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(conn);
            Ok(Self::H2(send))
        } else {
            let (send, conn) = http1::handshake(io).await.map_err(|e| e.to_string())?;
            tokio::spawn(conn);
            Ok(Self::H1(send))
        }
    }

    /// Whether the tunnel speaks HTTP/2.
    pub fn is_h2(&self) -> bool {
        matches!(self, Self::H2(_))
    }

    /// Sends a request and collects the response.
    pub async fn send(&mut self, request: Request<Full<Bytes>>) -> Result<Response<Bytes>, String> {
        let response = match self {
            Self::H1(send) => {
                send.ready().await.map_err(|e| e.to_string())?;
                send.send_request(request).await
            }
            Self::H2(send) => {
                send.ready().await.map_err(|e| e.to_string())?;
                send.send_request(request).await
            }
        }
        .map_err(|e| e.to_string())?;
        let (parts, body) = response.into_parts();
        let body = body.collect().await.map_err(|e| e.to_string())?.to_bytes();
        Ok(Response::from_parts(parts, body))
    }
}
