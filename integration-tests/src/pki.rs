//! A test PKI standing in for the web PKI: one CA, leaves for the upstream test hosts.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::ServerConfig;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A CA the upstreams' certificates chain to, written as a PEM file for `--upstream-ca`.
pub struct TestPki {
    issuer: CertifiedIssuer<'static, KeyPair>,
    dir: tempfile::TempDir,
}

impl TestPki {
    /// A fresh test CA.
    pub fn new() -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "sluice test upstream CA");
        let key = KeyPair::generate().expect("ca key");
        let issuer = CertifiedIssuer::self_signed(params, key).expect("self-signed ca");
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("upstream-ca.pem"), issuer.pem()).expect("write ca");
        Self { issuer, dir }
    }

    /// The CA certificate file (PEM).
    pub fn ca_path(&self) -> PathBuf {
        self.dir.path().join("upstream-ca.pem")
    }

    /// A directory for the test's other files.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A rustls server configuration for `names`, offering `alpn`.
    pub fn server_config(&self, names: &[&str], alpn: &[&[u8]]) -> Arc<ServerConfig> {
        self.server_config_with(names, alpn, |_| {})
    }

    /// As [`TestPki::server_config`], letting the test bend the leaf (expired, wrong usage).
    pub fn server_config_with(
        &self,
        names: &[&str],
        alpn: &[&[u8]],
        adjust: impl FnOnce(&mut CertificateParams),
    ) -> Arc<ServerConfig> {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).expect("leaf params");
        adjust(&mut params);
        let key = KeyPair::generate().expect("leaf key");
        let cert = params.signed_by(&key, &self.issuer).expect("sign leaf");
        let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let chain = vec![CertificateDer::from(cert.der().to_vec())];
        let mut config = ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(chain, key_der)
            .expect("server config");
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Arc::new(config)
    }

    /// A leaf for `names` written as PEM files (certificate, then key) in [`TestPki::dir`],
    /// for an upstream that is not Rust's to configure (a Python gRPC server).
    pub fn leaf_files(&self, names: &[&str]) -> (PathBuf, PathBuf) {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let params = CertificateParams::new(names.clone()).expect("leaf params");
        let key = KeyPair::generate().expect("leaf key");
        let cert = params.signed_by(&key, &self.issuer).expect("sign leaf");
        let stem = names.first().map_or("leaf", String::as_str);
        let cert_path = self.dir.path().join(format!("{stem}.crt.pem"));
        let key_path = self.dir.path().join(format!("{stem}.key.pem"));
        std::fs::write(&cert_path, cert.pem()).expect("write leaf certificate");
        std::fs::write(&key_path, key.serialize_pem()).expect("write leaf key");
        (cert_path, key_path)
    }
}

impl Default for TestPki {
    fn default() -> Self {
        Self::new()
    }
}
