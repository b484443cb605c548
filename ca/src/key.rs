//! Key pairs that wipe themselves: the CA's signing key and each leaf's key while it is
//! being certified.
//!
//! This module owns every private key the crate generates. It must never serialize a key
//! anywhere but into the rustls signer that needs it, never hand out the PKCS#8 bytes, and
//! never print a key: [`SecretKey`] has a `Debug` that says only what algorithm it is.
//!
//! rcgen keeps two copies of a generated key: the parsed key inside aws-lc (which aws-lc
//! cleanses when it frees it) and a PKCS#8 serialization in a plain `Vec<u8>`. [`SecretKey`]
//! zeroizes that serialization when it is dropped.

use std::fmt;
use std::sync::Arc;

use rcgen::{KeyPair, PKCS_ECDSA_P256_SHA256, PublicKeyData, SignatureAlgorithm, SigningKey};
use rustls::sign::SigningKey as RustlsSigningKey;
use rustls_pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use zeroize::Zeroize;

use crate::error::CaError;

/// A P-256 key pair held in memory only, zeroized on drop.
pub(crate) struct SecretKey(KeyPair);

impl SecretKey {
    /// Generates a fresh ECDSA P-256 key pair from the system's secure random source.
    pub(crate) fn generate() -> Result<Self, CaError> {
        KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)
            .map(Self)
            .map_err(|error| CaError::Crypto {
                what: "generating a P-256 key pair",
                detail: error.to_string(),
            })
    }

    /// Consumes the key into a rustls signer (aws-lc), wiping the PKCS#8 copy as it goes.
    ///
    /// The PKCS#8 bytes are lent to aws-lc by reference (no copy is made here) and wiped when
    /// `self` drops at the end of this call.
    pub(crate) fn into_rustls_signer(self) -> Result<Arc<dyn RustlsSigningKey>, CaError> {
        let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.0.serialized_der()));
        rustls::crypto::aws_lc_rs::sign::any_ecdsa_type(&der).map_err(|error| CaError::Crypto {
            what: "loading a leaf key into rustls",
            detail: error.to_string(),
        })
    }
}

#[cfg(test)]
impl SecretKey {
    /// Test-only: the PKCS#8 bytes, to show that no `Debug` output contains them.
    pub(crate) fn pkcs8_for_test(&self) -> &[u8] {
        self.0.serialized_der()
    }
}

impl Drop for SecretKey {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretKey")
            .field("algorithm", &"ECDSA P-256")
            .finish_non_exhaustive()
    }
}

impl PublicKeyData for SecretKey {
    fn der_bytes(&self) -> &[u8] {
        self.0.der_bytes()
    }

    fn algorithm(&self) -> &'static SignatureAlgorithm {
        PublicKeyData::algorithm(&self.0)
    }
}

impl SigningKey for SecretKey {
    fn sign(&self, msg: &[u8]) -> Result<Vec<u8>, rcgen::Error> {
        self.0.sign(msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_prints_key_material() {
        let key = SecretKey::generate().unwrap();
        let printed = format!("{key:?}");
        assert_eq!(printed, "SecretKey { algorithm: \"ECDSA P-256\", .. }");
    }

    #[test]
    fn zeroize_wipes_the_serialized_copy() {
        let mut key = SecretKey::generate().unwrap();
        assert!(key.0.serialized_der().iter().any(|&b| b != 0));
        key.0.zeroize();
        // `Vec::zeroize` clears the contents and the length.
        assert!(key.0.serialized_der().is_empty());
    }

    #[test]
    fn two_keys_differ() {
        let a = SecretKey::generate().unwrap();
        let b = SecretKey::generate().unwrap();
        assert_ne!(a.der_bytes(), b.der_bytes());
    }

    #[test]
    fn a_key_becomes_a_rustls_signer() {
        let signer = SecretKey::generate().unwrap().into_rustls_signer().unwrap();
        assert_eq!(signer.algorithm(), rustls::SignatureAlgorithm::ECDSA);
    }
}
