//! hudsucker with a no-op handler, as `sluice-bench` drives it.
//!
//! `sluice-bench-hudsucker --dir DIR --upstream-ca FILE`: mints a CA in memory, writes its
//! certificate to `DIR/ca.pem`, listens on an ephemeral 127.0.0.1 port, prints
//! `ready 127.0.0.1:PORT` on stdout, and proxies (CONNECT, TLS termination with
//! hudsucker's own rcgen CA, HTTP/1.1 and HTTP/2) until its stdin closes. Upstreams are
//! verified against the web PKI roots plus `FILE`, the benchmark's own upstream CA.
//!
//! The proxy is hudsucker's release as its README shows it (`RcgenAuthority`, the aws-lc-rs
//! provider, the no-op handlers), with two changes: the upstream trust, which its
//! `with_rustls_connector` cannot extend, and `TCP_NODELAY` on both legs (the listener's
//! accepted sockets inherit it; the upstream connector sets it), which hudsucker leaves
//! off: without it, Nagle's algorithm and delayed ACKs stall small exchanges by ~40 ms,
//! and the benchmark would measure that instead of the proxy. It must never listen beyond
//! loopback.
#![forbid(unsafe_code)]

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use hudsucker::Proxy;
use hudsucker::certificate_authority::RcgenAuthority;
use hudsucker::hyper_util::client::legacy::connect::HttpConnector;
use hudsucker::rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use hudsucker::rustls::crypto::aws_lc_rs;
use hudsucker::rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;

struct Args {
    dir: PathBuf,
    upstream_ca: PathBuf,
}

fn parse_args() -> Result<Args, String> {
    let mut dir = None;
    let mut upstream_ca = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let value = args.next().ok_or_else(|| format!("{arg} needs a value"))?;
        match arg.as_str() {
            "--dir" => dir = Some(PathBuf::from(value)),
            "--upstream-ca" => upstream_ca = Some(PathBuf::from(value)),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Args {
        dir: dir.ok_or("--dir is required")?,
        upstream_ca: upstream_ca.ok_or("--upstream-ca is required")?,
    })
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(why) => {
            eprintln!("sluice-bench-hudsucker: {why}");
            return ExitCode::from(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match runtime.block_on(serve(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("sluice-bench-hudsucker: {why}");
            ExitCode::FAILURE
        }
    }
}

async fn serve(args: Args) -> Result<(), String> {
    // The CA, as hudsucker's example builds it, but minted here instead of read from disk.
    let key = KeyPair::generate().map_err(|e| format!("CA key: {e}"))?;
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(|e| e.to_string())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, "sluice-bench hudsucker CA");
    let cert = params
        .self_signed(&key)
        .map_err(|e| format!("CA certificate: {e}"))?;
    std::fs::write(args.dir.join("ca.pem"), cert.pem()).map_err(|e| format!("ca.pem: {e}"))?;
    let issuer = Issuer::from_ca_cert_pem(&cert.pem(), key).map_err(|e| format!("issuer: {e}"))?;
    let ca = RcgenAuthority::new(issuer, 1_000, aws_lc_rs::default_provider());

    // Upstream trust: the web PKI roots (as `with_rustls_connector` has) plus the bench CA.
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    for cert in CertificateDer::pem_file_iter(&args.upstream_ca)
        .map_err(|e| format!("{}: {e}", args.upstream_ca.display()))?
    {
        let cert = cert.map_err(|e| format!("{}: {e}", args.upstream_ca.display()))?;
        roots.add(cert).map_err(|e| format!("upstream root: {e}"))?;
    }
    let client = ClientConfig::builder_with_provider(Arc::new(aws_lc_rs::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(client)
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http);

    let socket = tokio::net::TcpSocket::new_v4().map_err(|e| format!("socket: {e}"))?;
    socket
        .set_nodelay(true)
        .map_err(|e| format!("TCP_NODELAY: {e}"))?;
    socket
        .bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
        .map_err(|e| format!("bind: {e}"))?;
    let listener = socket.listen(1024).map_err(|e| format!("listen: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let proxy = Proxy::builder()
        .with_listener(listener)
        .with_ca(ca)
        .with_http_connector(https)
        .with_graceful_shutdown(stdin_closed())
        .build()
        .map_err(|e| format!("proxy: {e}"))?;
    let mut stdout = std::io::stdout();
    writeln!(stdout, "ready {addr}")
        .and_then(|()| stdout.flush())
        .map_err(|e| e.to_string())?;
    proxy.start().await.map_err(|e| format!("proxy: {e}"))
}

/// Resolves when stdin reaches its end: the harness closes it to stop this peer.
async fn stdin_closed() {
    let _ = tokio::task::spawn_blocking(|| {
        let mut sink = [0u8; 64];
        let mut stdin = std::io::stdin();
        while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
    })
    .await;
}
