//! The `token_exchange` fuzz target's harness: the two parsers of minted credentials, on
//! any bytes.
//!
//! - A token endpoint's answer (`mint::client::read_answer`), under each status a provider
//!   sends: it never panics, and a failure is always one of a fixed set of codes (an OAuth
//!   RFC's code, or a kind of failure), never words taken from the answer, which may echo a
//!   refresh token or a client secret.
//! - The sandbox's own token request (`mint::answer::read`, then `admit`), as a form or as
//!   JSON, with or without `Basic` client authentication: it never panics, and a request is
//!   admitted only when it carries a placeholder the sandbox holds (the refresh token's for
//!   a refresh, the client secret's for client credentials; any client secret given must be
//!   its placeholder).

use http::header::{AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue, StatusCode};

use crate::mint::answer::{self, Held};
use crate::mint::client::{OAUTH_ERRORS, read_answer};

/// The statuses a token endpoint answers with.
const STATUSES: [u16; 8] = [200, 201, 204, 400, 401, 403, 500, 503];

/// The kinds of failure that are not the provider's code.
const KINDS: [&str; 4] = [
    "not_a_token_response",
    "unreachable",
    "unusable_part",
    "other_error",
];

const HELD: Held<'static> = Held {
    access_token: "SLUICE_G_access0000000000",
    refresh_token: Some("SLUICE_G_REFRESH_TOKEN_000"),
    client_secret: Some("SLUICE_G_CLIENT_SECRET_000"),
};

/// One case: the first byte picks the status, the content type and the authentication;
/// the rest is the body (and, for `Basic`, its first half the credentials).
pub fn token_exchange(data: &[u8]) {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let status = StatusCode::from_u16(STATUSES[usize::from(selector) % STATUSES.len()])
        .expect("a valid status");
    if let Err(failure) = read_answer(status, body) {
        let code = failure.code();
        assert!(
            OAUTH_ERRORS.contains(&code) || KINDS.contains(&code),
            "a failure code outside the fixed set: {code:?}"
        );
    }

    let mut headers = HeaderMap::new();
    if selector & 0x10 != 0 {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    let body = if selector & 0x20 != 0 {
        use base64::Engine;
        let (credentials, rest) = body.split_at(body.len() / 2);
        let encoded = base64::engine::general_purpose::STANDARD.encode(credentials);
        if let Ok(value) = HeaderValue::from_str(&format!("Basic {encoded}")) {
            headers.insert(AUTHORIZATION, value);
        }
        rest
    } else {
        body
    };
    let Ok(asked) = answer::read(&headers, body) else {
        return;
    };
    if answer::admit(&asked, &HELD).is_ok() {
        let refresh = asked.refresh_token.as_deref() == HELD.refresh_token;
        let secret = asked.client_secret.as_deref() == HELD.client_secret;
        assert!(
            refresh || secret,
            "admitted without a placeholder: {asked:?}"
        );
        if let Some(given) = &asked.client_secret {
            assert_eq!(Some(given.as_str()), HELD.client_secret, "{asked:?}");
        }
        match asked.grant_type.as_deref() {
            Some("refresh_token") => assert!(refresh, "{asked:?}"),
            Some("client_credentials") => assert!(secret, "{asked:?}"),
            other => panic!("admitted grant {other:?}"),
        }
    }
}
