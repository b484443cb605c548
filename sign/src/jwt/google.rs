//! Google's service-account key file, and the assertion of the `jwt_bearer` grant
//! (RFC 7523) that it signs: what Google's token endpoint exchanges for an access token.
//!
//! # Example
//!
//! ```
//! use sluice_sign::jwt::google::ServiceAccount;
//! # let pem = String::from_utf8(include_bytes!("../../tests/fixtures/rsa-2048.pem").to_vec()).unwrap();
//! let file = serde_json::json!({
//!     "type": "service_account",
//!     "client_email": "agent@project.iam.gserviceaccount.com",
//!     "private_key_id": "k1",
//!     "private_key": pem,
//!     "token_uri": "https://oauth2.googleapis.com/token",
//! });
//! let account = ServiceAccount::from_json(file.to_string().as_bytes()).unwrap();
//! assert_eq!(account.client_email(), "agent@project.iam.gserviceaccount.com");
//! let scopes = ["https://www.googleapis.com/auth/cloud-platform".to_owned()];
//! let assertion = account.assertion("https://oauth2.googleapis.com/token", &scopes, 1_700_000_000).unwrap();
//! assert_eq!(assertion.split('.').count(), 3);
//! ```

use serde::{Deserialize, Serialize};
use zeroize::Zeroizing;

use super::{JwtError, RsaKey};

/// How long an assertion is good for: Google accepts at most an hour.
pub const ASSERTION_LIFETIME: u64 = 3600;

/// A service account's key, read from Google's key file. `Debug` prints no key.
#[derive(Clone, Debug)]
pub struct ServiceAccount {
    client_email: String,
    private_key_id: Option<String>,
    token_uri: Option<String>,
    key: RsaKey,
}

/// The parts of Google's key file sluice reads (the file has more; they are ignored, as
/// Google's own libraries ignore them).
#[derive(Deserialize)]
struct KeyFile {
    #[serde(rename = "type")]
    kind: Option<String>,
    client_email: Option<String>,
    /// Zeroized however the file is refused (a file of the wrong type still holds a key).
    private_key: Option<Zeroizing<String>>,
    private_key_id: Option<String>,
    token_uri: Option<String>,
}

/// The claims Google's token endpoint reads from an assertion.
#[derive(Serialize)]
struct Claims<'a> {
    iss: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    scope: Option<String>,
    aud: &'a str,
    iat: u64,
    exp: u64,
}

impl ServiceAccount {
    /// Reads Google's key file (JSON, `"type": "service_account"`).
    ///
    /// # Errors
    ///
    /// [`JwtError::KeyFile`] naming what is missing or wrong (never a value), or
    /// [`JwtError::NotRsaKey`] when `private_key` is not an RSA private key.
    pub fn from_json(bytes: &[u8]) -> Result<ServiceAccount, JwtError> {
        let file: KeyFile = serde_json::from_slice(bytes)
            .map_err(|_| JwtError::KeyFile("the key file is not a JSON object of strings"))?;
        match file.kind.as_deref() {
            Some("service_account") => {}
            Some(_) => {
                return Err(JwtError::KeyFile(
                    "the key file's type is not \"service_account\" (an authorized_user file is a refresh_token grant)",
                ));
            }
            None => return Err(JwtError::KeyFile("the key file has no \"type\"")),
        }
        let client_email = file
            .client_email
            .filter(|email| !email.is_empty())
            .ok_or(JwtError::KeyFile("the key file has no \"client_email\""))?;
        let pem = file
            .private_key
            .ok_or(JwtError::KeyFile("the key file has no \"private_key\""))?;
        Ok(ServiceAccount {
            client_email,
            private_key_id: file.private_key_id.filter(|id| !id.is_empty()),
            token_uri: file.token_uri,
            key: RsaKey::from_pem(pem.as_bytes())?,
        })
    }

    /// The account's email: the assertion's issuer.
    pub fn client_email(&self) -> &str {
        &self.client_email
    }

    /// The token endpoint the key file names, when it names one.
    pub fn token_uri(&self) -> Option<&str> {
        self.token_uri.as_deref()
    }

    /// The assertion for `audience` (the token endpoint), asking for `scopes`, issued at
    /// `now` (Unix seconds) and good for [`ASSERTION_LIFETIME`]; its header names the key
    /// (`kid`) when the file does.
    ///
    /// # Errors
    ///
    /// [`JwtError`] when the key does not sign.
    pub fn assertion(
        &self,
        audience: &str,
        scopes: &[String],
        now: u64,
    ) -> Result<Zeroizing<String>, JwtError> {
        let claims = Claims {
            iss: &self.client_email,
            scope: (!scopes.is_empty()).then(|| scopes.join(" ")),
            aud: audience,
            iat: now,
            exp: now + ASSERTION_LIFETIME,
        };
        self.key.sign(self.private_key_id.as_deref(), &claims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEM: &str = include_str!("../../tests/fixtures/rsa-2048.pem");
    const PUBLIC: &[u8] = include_bytes!("../../tests/fixtures/rsa-2048.pub.pem");

    fn key_file(kind: &str) -> serde_json::Value {
        serde_json::json!({
            "type": kind,
            "project_id": "p",
            "private_key_id": "abc123",
            "private_key": PEM,
            "client_email": "sa@p.iam.gserviceaccount.com",
            "client_id": "1234",
            "token_uri": "https://oauth2.googleapis.com/token",
        })
    }

    #[test]
    fn the_assertion_says_who_what_for_and_until_when() {
        let account =
            ServiceAccount::from_json(key_file("service_account").to_string().as_bytes()).unwrap();
        assert_eq!(
            account.token_uri(),
            Some("https://oauth2.googleapis.com/token")
        );
        let scopes = vec!["a".to_owned(), "b".to_owned()];
        let jwt = account
            .assertion("https://idp.test/token", &scopes, 1_000)
            .unwrap();
        let public = jsonwebtoken::DecodingKey::from_rsa_pem(PUBLIC).unwrap();
        let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
        validation.validate_exp = false;
        validation.set_audience(&["https://idp.test/token"]);
        let data =
            jsonwebtoken::decode::<serde_json::Value>(jwt.as_str(), &public, &validation).unwrap();
        assert_eq!(data.header.kid.as_deref(), Some("abc123"));
        assert_eq!(data.claims["iss"], "sa@p.iam.gserviceaccount.com");
        assert_eq!(data.claims["scope"], "a b");
        assert_eq!(data.claims["iat"], 1_000);
        assert_eq!(data.claims["exp"], 1_000 + ASSERTION_LIFETIME);
        let unscoped = account.assertion("x", &[], 1).unwrap();
        let data = jsonwebtoken::decode::<serde_json::Value>(unscoped.as_str(), &public, &{
            let mut v = validation.clone();
            v.validate_aud = false;
            v
        })
        .unwrap();
        assert!(data.claims.get("scope").is_none());
    }

    #[test]
    fn a_key_file_that_is_not_a_service_accounts_is_refused_by_what_is_wrong() {
        let cases = [
            (key_file("authorized_user"), "authorized_user"),
            (
                {
                    let mut f = key_file("service_account");
                    f.as_object_mut().unwrap().remove("client_email");
                    f
                },
                "client_email",
            ),
            (
                {
                    let mut f = key_file("service_account");
                    f.as_object_mut().unwrap().remove("private_key");
                    f
                },
                "private_key",
            ),
            (serde_json::json!(["not", "an", "object"]), "JSON object"),
        ];
        for (file, says) in cases {
            let error = ServiceAccount::from_json(file.to_string().as_bytes()).unwrap_err();
            assert!(error.to_string().contains(says), "{error}");
            assert!(!error.to_string().contains("PRIVATE KEY"));
        }
        let mut bad_key = key_file("service_account");
        bad_key["private_key"] =
            "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".into();
        assert_eq!(
            ServiceAccount::from_json(bad_key.to_string().as_bytes()).unwrap_err(),
            JwtError::NotRsaKey
        );
    }
}
