//! Credentials minted per run: the proxy's, checked on every CONNECT and every plain proxied
//! request, and the admin endpoint's, a second pair the workload never holds.
//!
//! The token is compared in constant time, and never logged: the printed URLs omit it.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use http::header::PROXY_AUTHORIZATION;
use http::{HeaderMap, HeaderName};
use subtle::ConstantTimeEq;
use zeroize::Zeroizing;

/// The per-run proxy credentials.
pub(crate) struct Credentials {
    user: String,
    /// The expected `Proxy-Authorization` header value, precomputed once per run.
    expected: Zeroizing<Vec<u8>>,
    token: Zeroizing<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

impl Credentials {
    /// Mints the proxy credentials for one run: user `sluice` and a 128-bit random token.
    pub(crate) fn mint() -> Result<Self, getrandom::Error> {
        Self::mint_for("sluice")
    }

    /// Mints credentials for `user` with a 128-bit random token of their own.
    pub(crate) fn mint_for(user: &str) -> Result<Self, getrandom::Error> {
        let mut raw = Zeroizing::new([0u8; 16]);
        getrandom::fill(raw.as_mut())?;
        Ok(Self::new(user, &hex::encode(raw.as_ref())))
    }

    /// Credentials with a given user and token (tests, and a future `--credentials`).
    pub(crate) fn new(user: &str, token: &str) -> Self {
        let pair = Zeroizing::new(format!("{user}:{token}"));
        let expected =
            Zeroizing::new(format!("Basic {}", STANDARD.encode(pair.as_bytes())).into_bytes());
        Self {
            user: user.to_owned(),
            expected,
            token: Zeroizing::new(token.to_owned()),
        }
    }

    /// The user name (not secret).
    pub(crate) fn user(&self) -> &str {
        &self.user
    }

    /// The token, for writing the run directory's `proxy-url` file only.
    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    /// Whether the request carries these credentials.
    ///
    /// Exactly one `Proxy-Authorization` header must be present; its value is compared to the
    /// expected one in constant time (the lengths may differ in time, which reveals nothing
    /// but the token's length, fixed for every run).
    pub(crate) fn is_authorized(&self, headers: &HeaderMap) -> bool {
        self.is_authorized_by(headers, &PROXY_AUTHORIZATION)
    }

    /// [`Credentials::is_authorized`] in another header: `Authorization`, for the admin
    /// endpoint, which is a server and not a proxy.
    pub(crate) fn is_authorized_by(&self, headers: &HeaderMap, header: &HeaderName) -> bool {
        let mut values = headers.get_all(header).iter();
        let (Some(value), None) = (values.next(), values.next()) else {
            return false;
        };
        bool::from(value.as_bytes().ct_eq(&self.expected))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for v in values {
            map.append(PROXY_AUTHORIZATION, HeaderValue::from_str(v).unwrap());
        }
        map
    }

    #[test]
    fn accepts_the_run_credentials_only() {
        let creds = Credentials::new("sluice", "t0ken");
        let good = format!("Basic {}", STANDARD.encode("sluice:t0ken"));
        assert!(creds.is_authorized(&headers(&[&good])));
        let wrong = format!("Basic {}", STANDARD.encode("sluice:t0kem"));
        assert!(!creds.is_authorized(&headers(&[&wrong])));
        assert!(!creds.is_authorized(&headers(&[])));
        assert!(!creds.is_authorized(&headers(&[&good, &good])));
    }

    #[test]
    fn two_runs_mint_different_tokens() {
        let a = Credentials::mint().unwrap();
        let b = Credentials::mint().unwrap();
        assert_ne!(a.token(), b.token());
        assert_eq!(a.token().len(), 32);
        assert!(!format!("{a:?}").contains(a.token()));
    }
}
