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

use crate::authority::Target;

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
            let sni = start
                .client_hello()
                .server_name()
                .map(|name| normalize_host(name).unwrap_or_else(|_| name.to_owned()));
            let is_ip = target.host.parse::<std::net::IpAddr>().is_ok();
            match &sni {
                Some(name) if *name == target.host => {}
                None if is_ip => {}
                _ => {
                    return Err(HandshakeRefused::SniMismatch {
                        sni,
                        target: target.authority(),
                    });
                }
            }
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
