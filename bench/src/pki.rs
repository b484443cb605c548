//! The benchmark's stand-in for the web PKI: a CA minted per run and a leaf for the upstream,
//! and the client configurations that trust a proxy's (or this) CA.
//!
//! Keys live in memory and in the run's temporary directory only; this module never
//! touches the network.

use std::path::Path;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::error::BenchError;

/// The name the upstream answers to (pinned to 127.0.0.1 by `/etc/hosts` and by sluice's
/// `--resolve`).
pub(crate) const UPSTREAM_HOST: &str = "localhost";

/// Mints a CA, writes its certificate to `ca_path`, and returns the upstream's TLS
/// configuration (a leaf for [`UPSTREAM_HOST`], ALPN `h2` and `http/1.1`, or `http/1.1`
/// alone when `h1_only`).
pub(crate) fn upstream_server_config(
    ca_path: &Path,
    h1_only: bool,
) -> Result<Arc<ServerConfig>, BenchError> {
    let issuer = mint_ca(ca_path, "sluice-bench upstream CA")?;
    let alpn: &[&[u8]] = if h1_only {
        &[b"http/1.1"]
    } else {
        &[b"h2", b"http/1.1"]
    };
    server_config(&issuer, &[UPSTREAM_HOST], alpn)
}

/// Mints a CA named `common_name` and writes its certificate (PEM) to `ca_path`.
pub(crate) fn mint_ca(
    ca_path: &Path,
    common_name: &str,
) -> Result<CertifiedIssuer<'static, KeyPair>, BenchError> {
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(tls_error)?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().map_err(tls_error)?)
        .map_err(tls_error)?;
    std::fs::write(ca_path, issuer.pem()).map_err(BenchError::file(ca_path))?;
    Ok(issuer)
}

/// A server configuration with a fresh leaf from `issuer` for `names`, offering `alpn`.
pub(crate) fn server_config(
    issuer: &CertifiedIssuer<'static, KeyPair>,
    names: &[&str],
    alpn: &[&[u8]],
) -> Result<Arc<ServerConfig>, BenchError> {
    let key = KeyPair::generate().map_err(tls_error)?;
    let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    let leaf = CertificateParams::new(names)
        .map_err(tls_error)?
        .signed_by(&key, issuer)
        .map_err(tls_error)?;
    let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let mut config = ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![CertificateDer::from(leaf.der().to_vec())], key_der)
        .map_err(|e| BenchError::Tls(e.to_string()))?;
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

fn tls_error(e: rcgen::Error) -> BenchError {
    BenchError::Tls(e.to_string())
}

/// The application protocol a client offers inside its tunnel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Proto {
    /// HTTP/1.1 only.
    H1,
    /// HTTP/2 only.
    H2,
}

/// Client TLS configurations trusting the certificates of one PEM file, one per protocol.
/// Session resumption is off, so every new tunnel costs a full handshake.
#[derive(Clone)]
pub(crate) struct ClientTls {
    h1: Arc<ClientConfig>,
    h2: Arc<ClientConfig>,
}

impl ClientTls {
    /// Trusts every certificate in `pem_path`.
    pub(crate) fn trusting(pem_path: &Path) -> Result<Self, BenchError> {
        let mut roots = RootCertStore::empty();
        let certs = CertificateDer::pem_file_iter(pem_path)
            .map_err(|e| BenchError::Tls(format!("{}: {e}", pem_path.display())))?;
        for cert in certs {
            let cert = cert.map_err(|e| BenchError::Tls(format!("{}: {e}", pem_path.display())))?;
            roots
                .add(cert)
                .map_err(|e| BenchError::Tls(format!("{}: {e}", pem_path.display())))?;
        }
        if roots.is_empty() {
            return Err(BenchError::Tls(format!(
                "{}: no certificate found, expected a PEM CA",
                pem_path.display()
            )));
        }
        let roots = Arc::new(roots);
        let make = |alpn: &[u8]| {
            let mut config = ClientConfig::builder()
                .with_root_certificates(roots.clone())
                .with_no_client_auth();
            config.alpn_protocols = vec![alpn.to_vec()];
            config.resumption = rustls::client::Resumption::disabled();
            Arc::new(config)
        };
        Ok(Self {
            h1: make(b"http/1.1"),
            h2: make(b"h2"),
        })
    }

    /// The configuration offering `proto`.
    pub(crate) fn config(&self, proto: Proto) -> Arc<ClientConfig> {
        match proto {
            Proto::H1 => self.h1.clone(),
            Proto::H2 => self.h2.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upstream_ca_file_is_trusted_by_a_client_config() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ca = dir.path().join("ca.pem");
        let server = upstream_server_config(&ca, false).expect("server config");
        assert_eq!(
            server.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        let client = ClientTls::trusting(&ca).expect("client config");
        assert_eq!(
            client.config(Proto::H2).alpn_protocols,
            vec![b"h2".to_vec()]
        );
        assert_eq!(
            client.config(Proto::H1).alpn_protocols,
            vec![b"http/1.1".to_vec()]
        );
    }

    #[test]
    fn a_file_without_certificates_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").expect("write");
        let err = ClientTls::trusting(&empty).err().expect("refused");
        assert!(err.to_string().contains("no certificate found"), "{err}");
    }
}
