//! Terminating the sandbox's TLS inside a CONNECT tunnel with a leaf from the run CA.
//!
//! The ClientHello's SNI must name the CONNECT host; otherwise the handshake is refused
//! (the connection is closed before any certificate is sent), because a client that asks
//! for one name inside a tunnel opened for another is trying to get a leaf, or a grant,
//! it should not have. A tunnel to an IP literal may come without SNI. The leaf itself is
//! handed out by the run CA's resolver pinned to the CONNECT host
//! ([`RunCa::resolver_for`]), which refuses any other name a second time.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rustls::ServerConfig;
use rustls::server::Acceptor;
use sluice_ca::RunCa;
use sluice_policies::normalize_host;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::LazyConfigAcceptor;
use tokio_rustls::server::TlsStream;

use crate::tls::target::Target;

/// The most hosts whose server configuration is kept; past it the cache starts over.
const CONFIG_CACHE_CAPACITY: usize = 1024;

/// Why a client's handshake was refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HandshakeRefused {
    /// The SNI names another host than the CONNECT target, or none where one is needed.
    #[error("TLS SNI {sni:?} does not name the CONNECT host {target}")]
    SniMismatch {
        /// What the client sent (normalised), if anything.
        sni: Option<String>,
        /// The tunnel's target.
        target: String,
    },
    /// The run CA cannot mint a leaf for this host.
    #[error("no certificate for {host}: {why}")]
    NoLeaf {
        /// The host.
        host: String,
        /// The CA's reason.
        why: String,
    },
    /// rustls refused the server configuration (never with its default protocol versions).
    #[error("TLS configuration refused: {0}")]
    Config(#[from] rustls::Error),
    /// The handshake did not complete.
    #[error("TLS handshake failed: {0}")]
    Io(#[from] std::io::Error),
    /// The handshake did not complete in time.
    #[error("TLS handshake timed out")]
    Timeout,
}

/// Checks that a ClientHello's SNI names the tunnel's host (compared normalised: lowercase,
/// no trailing dot); a tunnel to an IP literal may come without one.
fn check_sni(sni: Option<&str>, target: &Target) -> Result<(), HandshakeRefused> {
    let sni = sni.map(|name| normalize_host(name).unwrap_or_else(|_| name.to_owned()));
    let is_ip = target.host.parse::<std::net::IpAddr>().is_ok();
    match &sni {
        Some(name) if *name == target.host => Ok(()),
        None if is_ip => Ok(()),
        _ => Err(HandshakeRefused::SniMismatch {
            sni,
            target: target.authority(),
        }),
    }
}

/// Server configurations per host, each with the run CA's resolver for the host, ALPN `h2`,
/// `http/1.1`, and sluice's suite order ([`crate::suites`]).
/// Kept so that a new tunnel to a known host costs a handshake, not a configuration.
pub(crate) struct Terminator {
    ca: Arc<RunCa>,
    configs: Mutex<HashMap<String, Arc<ServerConfig>>>,
    timeout: std::time::Duration,
}

impl Terminator {
    /// A terminator minting leaves from `ca`.
    pub(crate) fn new(ca: Arc<RunCa>, timeout: std::time::Duration) -> Self {
        Self {
            ca,
            configs: Mutex::new(HashMap::new()),
            timeout,
        }
    }

    /// Accepts the client's TLS for `target`; returns the stream and whether it speaks h2.
    pub(crate) async fn accept<IO>(
        &self,
        io: IO,
        target: &Target,
    ) -> Result<(TlsStream<IO>, bool), HandshakeRefused>
    where
        IO: AsyncRead + AsyncWrite + Unpin,
    {
        let handshake = async {
            let start = LazyConfigAcceptor::new(Acceptor::default(), io).await?;
            check_sni(start.client_hello().server_name(), target)?;
            let config = self.config_for(&target.host)?;
            let stream = start.into_stream(config).await?;
            let is_h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
            Ok((stream, is_h2))
        };
        tokio::time::timeout(self.timeout, handshake)
            .await
            .map_err(|_| HandshakeRefused::Timeout)?
    }

    fn config_for(&self, host: &str) -> Result<Arc<ServerConfig>, HandshakeRefused> {
        let mut configs = self.configs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(config) = configs.get(host) {
            return Ok(config.clone());
        }
        let resolver = self
            .ca
            .resolver_for(host)
            .map_err(|e| HandshakeRefused::NoLeaf {
                host: host.to_owned(),
                why: e.to_string(),
            })?;
        let mut config = ServerConfig::builder_with_provider(crate::suites::provider())
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_cert_resolver(resolver);
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        // sluice's suite order (AES-128-GCM first, see `suites`), not the client's.
        config.ignore_client_order = true;
        // One ticket per handshake, not rustls's two: a client resumes one connection with
        // it, and each ticket costs the handshake a random id, a cache entry and a record
        // (about 3% of a new tunnel's instructions, measured with callgrind).
        config.send_tls13_tickets = 1;
        let config = Arc::new(config);
        if configs.len() >= CONFIG_CACHE_CAPACITY {
            configs.clear();
        }
        configs.insert(host.to_owned(), config.clone());
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rustls::pki_types::ServerName;
    use sluice_ca::CaConfig;
    use tokio_rustls::TlsConnector;

    use super::*;

    fn target(host: &str) -> Target {
        Target {
            host: host.to_owned(),
            port: 443,
        }
    }

    #[test]
    fn the_sni_must_name_the_connect_host() {
        let cases: &[(Option<&str>, &str, bool)] = &[
            (Some("api.test"), "api.test", true),
            (Some("API.test."), "api.test", true),
            (Some("other.test"), "api.test", false),
            (Some("api.test.evil"), "api.test", false),
            (None, "api.test", false),
            (None, "127.0.0.1", true),
            (Some("api.test"), "127.0.0.1", false),
        ];
        for (sni, host, ok) in cases {
            assert_eq!(
                check_sni(*sni, &target(host)).is_ok(),
                *ok,
                "{sni:?} for {host}"
            );
        }
    }

    /// A real handshake over an in-memory pipe: the client trusts the run CA and asks for
    /// `sni`, offering `alpn`.
    async fn handshake(
        sni: &str,
        alpn: &[&[u8]],
    ) -> (Result<bool, HandshakeRefused>, Result<(), std::io::Error>) {
        let ca = Arc::new(
            RunCa::mint(CaConfig::new(
                "0123456789abcdef",
                vec!["api.test".to_owned()],
            ))
            .unwrap(),
        );
        let terminator = Terminator::new(ca.clone(), std::time::Duration::from_secs(5));
        let mut roots = rustls::RootCertStore::empty();
        let pem = ca.cert_pem();
        for cert in rustls_pki_types::pem::PemObject::pem_slice_iter(pem.as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        let mut client = rustls::ClientConfig::builder_with_provider(crate::suites::provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        client.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        let (client_io, server_io) = tokio::io::duplex(64 * 1024);
        let connector = TlsConnector::from(Arc::new(client));
        let name = ServerName::try_from(sni.to_owned()).unwrap();
        let api = target("api.test");
        let server = terminator.accept(server_io, &api);
        let client = connector.connect(name, client_io);
        let (server, client) = tokio::join!(server, client);
        (server.map(|(_, is_h2)| is_h2), client.map(|_| ()))
    }

    #[tokio::test]
    async fn a_handshake_for_the_connect_host_gets_its_leaf_and_alpn() {
        let (server, client) = handshake("api.test", &[b"h2", b"http/1.1"]).await;
        assert!(client.is_ok(), "{client:?}");
        assert!(server.unwrap(), "h2 offered first is chosen");
        let (server, client) = handshake("api.test", &[b"http/1.1"]).await;
        assert!(client.is_ok(), "{client:?}");
        assert!(!server.unwrap(), "an http/1.1-only client gets http/1.1");
    }

    #[tokio::test]
    async fn a_handshake_for_another_host_is_refused_before_any_certificate() {
        let (server, client) = handshake("other.test", &[b"h2"]).await;
        assert!(
            matches!(server, Err(HandshakeRefused::SniMismatch { .. })),
            "{server:?}"
        );
        assert!(client.is_err(), "the client gets no certificate to accept");
    }
}
