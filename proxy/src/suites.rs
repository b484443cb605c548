//! The TLS that sluice speaks on both legs: rustls's aws-lc-rs provider with its default
//! (strong) suites, TLS 1.2 and 1.3 only, AES-128-GCM preferred.
//!
//! This module owns the order of the suites and nothing else: which suites exist, which
//! protocol versions and which key exchanges are allowed stay rustls's safe defaults. It
//! must never add a suite rustls does not enable by default.
//!
//! Why AES-128-GCM first: it is TLS 1.3's mandatory suite and what BoringSSL and Go prefer
//! on CPUs with AES instructions. Its key schedule runs on SHA-256, which such CPUs also
//! accelerate, where AES-256-GCM's runs on SHA-384, which they do not: measured here, the
//! SHA-384 block function was the largest single cost of a new tunnel's handshake, and
//! AES-256 the slower cipher for bodies. 128-bit keys are TLS's baseline strength.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::{CipherSuite, SupportedCipherSuite};

/// The provider for every TLS configuration sluice builds, client and server.
pub(crate) fn provider() -> Arc<CryptoProvider> {
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    // A stable sort: within each rank rustls's own order stands.
    provider.cipher_suites.sort_by_key(rank);
    Arc::new(provider)
}

/// TLS 1.3 suites before TLS 1.2 ones (rustls's own order), and within each version
/// AES-128-GCM first.
fn rank(suite: &SupportedCipherSuite) -> u8 {
    let version = if suite.tls13().is_some() { 0 } else { 2 };
    let cipher = match suite.suite() {
        CipherSuite::TLS13_AES_128_GCM_SHA256
        | CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
        | CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => 0,
        _ => 1,
    };
    version + cipher
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_suites_as_rustls_with_aes_128_gcm_first() {
        let ours = provider();
        let default = rustls::crypto::aws_lc_rs::default_provider();
        let names = |suites: &[SupportedCipherSuite]| {
            let mut names: Vec<_> = suites.iter().map(|s| s.suite()).collect();
            names.sort_by_key(|s| u16::from(*s));
            names
        };
        assert_eq!(names(&ours.cipher_suites), names(&default.cipher_suites));
        let tls13: Vec<_> = ours
            .cipher_suites
            .iter()
            .filter(|s| s.tls13().is_some())
            .map(|s| s.suite())
            .collect();
        assert_eq!(tls13[0], CipherSuite::TLS13_AES_128_GCM_SHA256);
        assert!(
            ours.cipher_suites[..tls13.len()]
                .iter()
                .all(|s| s.tls13().is_some())
        );
        let tls12_first = ours.cipher_suites.iter().find(|s| s.tls13().is_none());
        assert_eq!(
            tls12_first.map(|s| s.suite()),
            Some(CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256)
        );
        assert_eq!(ours.kx_groups.len(), default.kx_groups.len());
    }
}
