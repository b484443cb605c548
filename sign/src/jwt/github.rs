//! A GitHub App's JWT: what GitHub takes, as `Authorization: Bearer`, to mint an
//! installation token (`POST /app/installations/{id}/access_tokens`).
//!
//! # Example
//!
//! ```
//! use sluice_sign::jwt::RsaKey;
//! use sluice_sign::jwt::github::app_jwt;
//! # let pem = include_bytes!("../../tests/fixtures/rsa-2048.pem");
//! let key = RsaKey::from_pem(pem).unwrap();
//! let jwt = app_jwt(&key, 12345, 1_700_000_000).unwrap();
//! assert_eq!(jwt.split('.').count(), 3);
//! ```

use serde::Serialize;
use zeroize::Zeroizing;

use super::{JwtError, RsaKey};

/// How far in the past `iat` is set: GitHub's advice, against clock drift.
pub const BACKDATE: u64 = 60;

/// How long the JWT is good for after `now`: GitHub refuses one that lives past ten minutes.
pub const LIFETIME: u64 = 540;

#[derive(Serialize)]
struct Claims {
    iat: u64,
    exp: u64,
    iss: String,
}

/// The App's JWT, issued at `now` (Unix seconds): `iat` [`BACKDATE`] before it, `exp`
/// [`LIFETIME`] after it (ten minutes from `iat` at most), `iss` the App's id.
///
/// # Errors
///
/// [`JwtError`] when the key does not sign.
pub fn app_jwt(key: &RsaKey, app_id: u64, now: u64) -> Result<Zeroizing<String>, JwtError> {
    let claims = Claims {
        iat: now.saturating_sub(BACKDATE),
        exp: now + LIFETIME,
        iss: app_id.to_string(),
    };
    key.sign(None, &claims)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_jwt_names_the_app_and_lives_under_ten_minutes() {
        let key = RsaKey::from_pem(include_bytes!("../../tests/fixtures/rsa-2048.pem")).unwrap();
        let jwt = app_jwt(&key, 42, 10_000).unwrap();
        let public = jsonwebtoken::DecodingKey::from_rsa_pem(include_bytes!(
            "../../tests/fixtures/rsa-2048.pub.pem"
        ))
        .unwrap();
        let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
        validation.validate_exp = false;
        let data =
            jsonwebtoken::decode::<serde_json::Value>(jwt.as_str(), &public, &validation).unwrap();
        assert_eq!(data.claims["iss"], "42");
        let (iat, exp) = (
            data.claims["iat"].as_u64().unwrap(),
            data.claims["exp"].as_u64().unwrap(),
        );
        assert_eq!(iat, 10_000 - BACKDATE);
        assert!(exp > 10_000 && exp - iat <= 600, "{iat} {exp}");
    }
}
