//! JWTs sluice signs with a key it holds: RS256, by the `jsonwebtoken` crate on the
//! workspace's one crypto provider (aws-lc-rs). The assertion of the `jwt_bearer` grant
//! ([`google`]) is one; a GitHub App's JWT is another.
//!
//! # Example
//!
//! ```
//! use sluice_sign::jwt::RsaKey;
//! # let pem = include_bytes!("../../tests/fixtures/rsa-2048.pem");
//! let key = RsaKey::from_pem(pem).unwrap();
//! let jwt = key.sign(Some("key-1"), &serde_json::json!({"iss": "me", "iat": 0, "exp": 600})).unwrap();
//! assert_eq!(jwt.split('.').count(), 3);
//! ```
//!
//! It must never put the key anywhere but into a signature: the PEM is held in a zeroized
//! buffer, `Debug` prints nothing of it, and an error says what is wrong, never what the
//! key holds. The crate's own key type (DER bytes, not zeroized) lives only for one
//! signature.

pub mod github;
pub mod google;

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::Serialize;
use zeroize::Zeroizing;

/// Why a key cannot sign, or a key file cannot be read: never a byte of the key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum JwtError {
    /// The PEM is not an RSA private key (PKCS#1 or PKCS#8), or the key does not sign.
    #[error("not an RSA private key in PEM (PKCS#1 `RSA PRIVATE KEY` or PKCS#8 `PRIVATE KEY`)")]
    NotRsaKey,
    /// A key file is not what it should be; the words say what is missing.
    #[error("{0}")]
    KeyFile(&'static str),
    /// The claims could not be written (not expected of the claims sluice writes).
    #[error("the JWT could not be signed")]
    Sign,
}

/// An RSA private key that signs JWTs (RS256). Zeroized on drop; `Debug` prints nothing.
#[derive(Clone)]
pub struct RsaKey {
    pem: Zeroizing<Vec<u8>>,
}

impl std::fmt::Debug for RsaKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RsaKey(..)")
    }
}

impl RsaKey {
    /// Reads a PEM RSA private key, and signs once to prove it can: a key that would fail
    /// at its first mint fails here instead, where it is read.
    ///
    /// # Errors
    ///
    /// [`JwtError::NotRsaKey`] for anything else (a public key, an EC key, a certificate,
    /// a key that does not parse).
    pub fn from_pem(pem: &[u8]) -> Result<RsaKey, JwtError> {
        let key = RsaKey {
            pem: Zeroizing::new(pem.to_vec()),
        };
        key.sign(None, &serde_json::json!({}))
            .map_err(|_| JwtError::NotRsaKey)?;
        Ok(key)
    }

    /// Signs `claims` (RS256), with `kid` in the header when given.
    ///
    /// # Errors
    ///
    /// [`JwtError::NotRsaKey`] when the key does not sign, [`JwtError::Sign`] when the
    /// claims do not serialize.
    pub fn sign(
        &self,
        kid: Option<&str>,
        claims: &impl Serialize,
    ) -> Result<Zeroizing<String>, JwtError> {
        let key = EncodingKey::from_rsa_pem(&self.pem).map_err(|_| JwtError::NotRsaKey)?;
        let mut header = Header::new(Algorithm::RS256);
        header.kid = kid.map(str::to_owned);
        jsonwebtoken::encode(&header, claims, &key)
            .map(Zeroizing::new)
            .map_err(|error| match error.kind() {
                jsonwebtoken::errors::ErrorKind::Json(_) => JwtError::Sign,
                _ => JwtError::NotRsaKey,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEM: &[u8] = include_bytes!("../../tests/fixtures/rsa-2048.pem");
    const PUBLIC: &[u8] = include_bytes!("../../tests/fixtures/rsa-2048.pub.pem");

    #[test]
    fn a_signed_jwt_verifies_with_the_public_key_and_carries_the_kid() {
        let key = RsaKey::from_pem(PEM).unwrap();
        let claims = serde_json::json!({"iss": "sluice", "exp": 4_000_000_000u64});
        let jwt = key.sign(Some("k1"), &claims).unwrap();
        let public = jsonwebtoken::DecodingKey::from_rsa_pem(PUBLIC).unwrap();
        let mut validation = jsonwebtoken::Validation::new(Algorithm::RS256);
        validation.required_spec_claims.clear();
        let data =
            jsonwebtoken::decode::<serde_json::Value>(jwt.as_str(), &public, &validation).unwrap();
        assert_eq!(data.claims["iss"], "sluice");
        assert_eq!(data.header.kid.as_deref(), Some("k1"));
    }

    #[test]
    fn anything_but_an_rsa_private_key_is_refused_without_quoting_it() {
        let ec = b"-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg\n-----END PRIVATE KEY-----\n";
        for bad in [PUBLIC, &ec[..], b"not a key", b""] {
            let error = RsaKey::from_pem(bad).unwrap_err();
            assert_eq!(error, JwtError::NotRsaKey);
        }
        assert_eq!(
            format!("{:?}", RsaKey::from_pem(PEM).unwrap()),
            "RsaKey(..)"
        );
    }
}
