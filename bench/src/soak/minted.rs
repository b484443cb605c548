//! The soak's minted credential (`--mint-lifetime SECS`): a token endpoint on the soak's
//! upstream that issues short-lived tokens for the client credentials grant (RFC 6749
//! §4.4), and an API path that accepts only a token it issued, before it expires.
//!
//! As a provider does where it matters: the client must authenticate (`Authorization:
//! Basic`, RFC 6749 §2.3.1) or gets `401 invalid_client`; a grant other than
//! `client_credentials` gets `400 unsupported_grant_type`; an unknown or expired token
//! gets `401` at the API. Over the soak, sluice must refresh each token before it expires
//! (so no request arrives with an expired one), mint about once per lifetime (not per
//! request, not per reload), and never let a token reach the client, its logs or the
//! audit log.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;
use http::{HeaderValue, Response, StatusCode};

use super::body::{self, SoakBody};

/// The minted secret's name in the declaration.
pub(crate) const MINTED_SECRET: &str = "soak_minted";
/// The variable sluice reads the client secret from.
pub(crate) const CLIENT_SECRET_VAR: &str = "SLUICE_SOAK_CLIENT_SECRET";
/// Every token this endpoint issues begins so: a client, a log or the audit log holding
/// it is found by it.
pub(crate) const TOKEN_PREFIX: &str = "soak-minted-";
/// The token endpoint's path, and the API path that wants a minted token.
pub(crate) const TOKEN_PATH: &str = "/token";
pub(crate) const MINTED_PATH: &str = "/minted";
const CLIENT_ID: &str = "soak-client";

/// What the endpoint saw over the soak, for its report.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub(crate) struct MintTally {
    /// Each token's lifetime, in seconds.
    pub(crate) lifetime_s: u64,
    /// Tokens issued.
    pub(crate) tokens: u64,
    /// Token requests refused (bad client authentication or grant).
    pub(crate) refused_token_requests: u64,
    /// API requests with a live token, an expired one, one never issued.
    pub(crate) live: u64,
    pub(crate) expired: u64,
    pub(crate) unknown: u64,
    /// `mint` events in the audit log.
    pub(crate) audit_mints: u64,
}

/// The token endpoint and what it saw.
pub(crate) struct Endpoint {
    lifetime: Duration,
    client_secret: String,
    /// Every token issued, with when it expires.
    issued: Mutex<Vec<(String, Instant)>>,
    /// Token requests refused for bad client authentication or grant.
    pub(crate) refused_token_requests: AtomicU64,
    /// API requests with a live token, an expired one, and one never issued.
    pub(crate) live: AtomicU64,
    pub(crate) expired: AtomicU64,
    pub(crate) unknown: AtomicU64,
}

impl Endpoint {
    pub(crate) fn new(lifetime: Duration, client_secret: &str) -> Self {
        Self {
            lifetime,
            client_secret: client_secret.to_owned(),
            issued: Mutex::new(Vec::new()),
            refused_token_requests: AtomicU64::new(0),
            live: AtomicU64::new(0),
            expired: AtomicU64::new(0),
            unknown: AtomicU64::new(0),
        }
    }

    /// The declaration's lines for the minted secret, granted as the plain one is.
    pub(crate) fn declaration(&self, host: &str, port: u16) -> String {
        format!(
            "  {MINTED_SECRET}:\n    \
               oauth2:\n      \
                 token_url: https://{host}:{port}{TOKEN_PATH}\n      \
                 grant: client_credentials\n      \
                 client_id: {CLIENT_ID}\n      \
                 client_secret: {{ env: {CLIENT_SECRET_VAR} }}\n    \
               hosts: [\"{host}\"]\n    \
               sinks: [egress]\n    \
               in: [header]\n    \
               header: [Authorization]\n"
        )
    }

    /// Its figures so far (the audit log's are the judge's to add).
    pub(crate) fn tally(&self) -> MintTally {
        let count = |c: &AtomicU64| c.load(Ordering::Relaxed);
        MintTally {
            lifetime_s: self.lifetime.as_secs(),
            tokens: self.lock().len() as u64,
            refused_token_requests: count(&self.refused_token_requests),
            live: count(&self.live),
            expired: count(&self.expired),
            unknown: count(&self.unknown),
            audit_mints: 0,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(String, Instant)>> {
        self.issued.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Answers a token request.
    pub(crate) fn token(
        &self,
        authorization: Option<&HeaderValue>,
        form: &[u8],
    ) -> Response<SoakBody> {
        let expected = format!("{CLIENT_ID}:{}", self.client_secret);
        let authenticated = authorization
            .and_then(|v| v.as_bytes().strip_prefix(b"Basic "))
            .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok())
            .is_some_and(|pair| pair == expected.as_bytes());
        let grant = form_urlencoded::parse(form)
            .find(|(key, _)| key == "grant_type")
            .map(|(_, value)| value.into_owned());
        let refuse = |status, error: &str| {
            self.refused_token_requests.fetch_add(1, Ordering::Relaxed);
            json(status, format!("{{\"error\":\"{error}\"}}"))
        };
        if !authenticated {
            return refuse(StatusCode::UNAUTHORIZED, "invalid_client");
        }
        if grant.as_deref() != Some("client_credentials") {
            return refuse(StatusCode::BAD_REQUEST, "unsupported_grant_type");
        }
        let mut issued = self.lock();
        let token = format!(
            "{TOKEN_PREFIX}{:06}-{:x}",
            issued.len() + 1,
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        );
        issued.push((token.clone(), Instant::now() + self.lifetime));
        json(
            StatusCode::OK,
            format!(
                "{{\"access_token\":\"{token}\",\"token_type\":\"Bearer\",\"expires_in\":{}}}",
                self.lifetime.as_secs()
            ),
        )
    }

    /// Answers the API path: `200` with the token echoed back (`token=…`, for sluice to
    /// redact) when it is live, `401` when it expired or was never issued.
    pub(crate) fn api(&self, authorization: Option<&HeaderValue>) -> Response<SoakBody> {
        let token = authorization.and_then(|v| v.as_bytes().strip_prefix(b"Bearer "));
        let expires = token.and_then(|token| {
            self.lock()
                .iter()
                .find(|(issued, _)| issued.as_bytes() == token)
                .map(|(_, expires)| *expires)
        });
        let (counter, status) = match expires {
            Some(at) if Instant::now() < at => (&self.live, StatusCode::OK),
            Some(_) => (&self.expired, StatusCode::UNAUTHORIZED),
            None => (&self.unknown, StatusCode::UNAUTHORIZED),
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let mut response = Response::new(match (status, token) {
            (StatusCode::OK, Some(token)) => {
                let mut echo = b"token=".to_vec();
                echo.extend_from_slice(token);
                echo.push(b'\n');
                body::full(echo)
            }
            _ => body::empty(),
        });
        *response.status_mut() = status;
        response
    }
}

fn json(status: StatusCode, text: String) -> Response<SoakBody> {
    let mut response = Response::new(body::full(text));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(pair: &str) -> HeaderValue {
        let b64 = base64::engine::general_purpose::STANDARD.encode(pair);
        HeaderValue::from_str(&format!("Basic {b64}")).unwrap()
    }

    #[test]
    fn a_token_is_issued_only_to_the_client_and_accepted_only_while_live() {
        let endpoint = Endpoint::new(Duration::from_millis(50), "s3cret");
        let form = b"grant_type=client_credentials";
        let wrong = endpoint.token(Some(&basic("soak-client:other")), form);
        assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
        let grant = endpoint.token(Some(&basic("soak-client:s3cret")), b"grant_type=password");
        assert_eq!(grant.status(), StatusCode::BAD_REQUEST);
        assert_eq!(endpoint.refused_token_requests.load(Ordering::Relaxed), 2);

        let ok = endpoint.token(Some(&basic("soak-client:s3cret")), form);
        assert_eq!(ok.status(), StatusCode::OK);
        let token = endpoint.lock().last().unwrap().0.clone();
        assert!(token.starts_with(TOKEN_PREFIX));
        let bearer = HeaderValue::from_str(&format!("Bearer {token}")).unwrap();
        assert_eq!(endpoint.api(Some(&bearer)).status(), StatusCode::OK);
        let never = HeaderValue::from_static("Bearer soak-minted-999999-0");
        assert_eq!(
            endpoint.api(Some(&never)).status(),
            StatusCode::UNAUTHORIZED
        );
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(
            endpoint.api(Some(&bearer)).status(),
            StatusCode::UNAUTHORIZED
        );
        let counts = |c: &AtomicU64| c.load(Ordering::Relaxed);
        assert_eq!(
            (
                counts(&endpoint.live),
                counts(&endpoint.expired),
                counts(&endpoint.unknown)
            ),
            (1, 1, 1)
        );
    }
}
