//! A tunnel through sluice, as the soak's clients open one: TCP to sluice, `CONNECT` with
//! the proxy credentials, TLS with the run CA, then (for the load) the HTTP handshake.

use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::body::SoakBody;
use super::load::Client;
use crate::pki::Proto;

/// One open connection through a tunnel.
pub(super) enum Conn {
    H1(http1::SendRequest<SoakBody>),
    H2(http2::SendRequest<SoakBody>),
}

/// Why a tunnel could not be opened.
pub(super) enum Opened {
    /// The proxy answered the CONNECT with this status.
    Refused(u16),
    /// Anything else.
    Failed(String),
}

impl std::fmt::Display for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Refused(status) => write!(f, "CONNECT answered {status}"),
            Self::Failed(why) => f.write_str(why),
        }
    }
}

/// TCP to sluice, CONNECT, TLS with the run CA, the HTTP handshake.
pub(super) async fn open(
    client: &Client,
    host: &str,
    port: u16,
    proto: Proto,
) -> Result<Conn, Opened> {
    let failed = |what: &str, e: &dyn std::fmt::Display| Opened::Failed(format!("{what}: {e}"));
    let tls = open_tls(client, host, port, proto).await?;
    let io = TokioIo::new(tls);
    Ok(match proto {
        Proto::H1 => {
            let (send, conn) = http1::handshake(io)
                .await
                .map_err(|e| failed("HTTP/1.1 handshake", &e))?;
            tokio::spawn(conn);
            Conn::H1(send)
        }
        Proto::H2 => {
            let (send, conn) = http2::handshake(TokioExecutor::new(), io)
                .await
                .map_err(|e| failed("HTTP/2 handshake", &e))?;
            tokio::spawn(conn);
            Conn::H2(send)
        }
    })
}

/// TCP to sluice, CONNECT, TLS with the run CA (offering `proto`).
pub(super) async fn open_tls(
    client: &Client,
    host: &str,
    port: u16,
    proto: Proto,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>, Opened> {
    let failed = |what: &str, e: &dyn std::fmt::Display| Opened::Failed(format!("{what}: {e}"));
    let mut tcp = TcpStream::connect(client.proxy)
        .await
        .map_err(|e| failed("connect", &e))?;
    let _ = tcp.set_nodelay(true);
    let authority = format!("{host}:{port}");
    match crate::load::send_connect(&mut tcp, &authority, Some(&client.proxy_auth)).await {
        Ok(200) => {}
        Ok(status) => return Err(Opened::Refused(status)),
        Err(why) => return Err(Opened::Failed(why)),
    }
    let name = ServerName::try_from(host.to_owned()).map_err(|e| failed("server name", &e))?;
    TlsConnector::from(client.tls.config(proto))
        .connect(name, tcp)
        .await
        .map_err(|e| failed("TLS inside the tunnel", &e))
}
