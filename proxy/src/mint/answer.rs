//! The token endpoint as the sandbox sees it: sluice. A sandbox's own token request (a
//! client refreshing by itself) carries placeholders; it is read here, checked against the
//! minted secret's placeholders, and answered with a standard token response (RFC 6749
//! §5.1) whose tokens are placeholders. It never reaches the identity provider.
//!
//! Both the form RFC 6749 asks for and a JSON object (as some vendors' clients send) are
//! read, and the answer is JSON either way, as §5.1 says. Nothing here touches a real value.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use serde_json::json;
use subtle::ConstantTimeEq;

use crate::body::{self, Body};

/// The largest token request read: a grant is a few hundred bytes.
pub(crate) const MAX_TOKEN_REQUEST: usize = 16 * 1024;

/// What a sandbox's token request asks, as far as sluice needs to know.
#[derive(Default, PartialEq, Eq)]
pub(crate) struct Asked {
    pub(crate) grant_type: Option<String>,
    pub(crate) refresh_token: Option<String>,
    /// From the body, or the password of `Authorization: Basic`.
    pub(crate) client_secret: Option<String>,
}

/// The grant, and whether each credential came: they are placeholders when the sandbox
/// behaves, but it may send anything, a real value among them.
impl std::fmt::Debug for Asked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let given = |v: &Option<String>| v.as_ref().map(|_| "<given>");
        // The grants sluice answers, by name; any other word is the sandbox's free text.
        let grant = self.grant_type.as_deref().map(|g| match g {
            "refresh_token" | "client_credentials" => g,
            _ => "<other>",
        });
        f.debug_struct("Asked")
            .field("grant_type", &grant)
            .field("refresh_token", &given(&self.refresh_token))
            .field("client_secret", &given(&self.client_secret))
            .finish()
    }
}

/// The placeholders of one minted secret the sandbox holds.
pub(crate) struct Held<'a> {
    pub(crate) access_token: &'a str,
    pub(crate) refresh_token: Option<&'a str>,
    pub(crate) client_secret: Option<&'a str>,
}

/// Reads a token request's body (form or JSON) and its `Basic` client authentication.
pub(crate) fn read(headers: &HeaderMap, body: &[u8]) -> Result<Asked, &'static str> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("application/json")
        });
    let mut asked = Asked::default();
    let mut set = |key: &str, value: String| match key {
        "grant_type" => asked.grant_type = Some(value),
        "refresh_token" => asked.refresh_token = Some(value),
        "client_secret" => asked.client_secret = Some(value),
        _ => {}
    };
    if json {
        let object: serde_json::Map<String, serde_json::Value> =
            serde_json::from_slice(body).map_err(|_| "the token request is not a JSON object")?;
        for (key, value) in object {
            if let serde_json::Value::String(value) = value {
                set(&key, value);
            }
        }
    } else {
        for (key, value) in form_urlencoded::parse(body) {
            set(&key, value.into_owned());
        }
    }
    if let Some(password) = basic_password(headers) {
        asked.client_secret.get_or_insert(password);
    }
    Ok(asked)
}

/// The password of `Authorization: Basic base64(id:password)`, percent-decoded as RFC 6749
/// §2.3.1 has clients encode it.
fn basic_password(headers: &HeaderMap) -> Option<String> {
    use base64::Engine;
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, encoded) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (_, password) = decoded.split_once(':')?;
    Some(percent_decode(password).unwrap_or_else(|| password.to_owned()))
}

fn percent_decode(text: &str) -> Option<String> {
    form_urlencoded::parse(format!("x={text}").as_bytes())
        .next()
        .map(|(_, v)| v.replace(' ', "+"))
}

/// Whether `asked` is a grant this secret answers: a refresh with its refresh token's
/// placeholder, or client credentials with its client secret's placeholder; a client secret
/// given with a refresh must be its placeholder too. `Err` says what is wrong.
pub(crate) fn admit(asked: &Asked, held: &Held<'_>) -> Result<(), String> {
    let same =
        |given: &str, placeholder: &str| bool::from(given.as_bytes().ct_eq(placeholder.as_bytes()));
    if let Some(given) = &asked.client_secret {
        match held.client_secret {
            Some(placeholder) if same(given, placeholder) => {}
            Some(_) => return Err("the client secret is not this secret's placeholder".into()),
            None => return Err("this secret has no client secret to present".into()),
        }
    }
    match asked.grant_type.as_deref() {
        Some("refresh_token") => match (held.refresh_token, &asked.refresh_token) {
            (Some(placeholder), Some(given)) if same(given, placeholder) => Ok(()),
            (Some(_), _) => Err("the refresh token is not this secret's placeholder".into()),
            (None, _) => Err("this secret has no refresh token".into()),
        },
        Some("client_credentials") => match (held.client_secret, &asked.client_secret) {
            (Some(_), Some(_)) => Ok(()),
            (Some(_), None) => Err("client credentials without the client secret".into()),
            (None, _) => Err("this secret has no client secret".into()),
        },
        Some(other) => Err(format!(
            "grant_type {} is not answered here; sluice answers refresh_token and client_credentials",
            other.escape_debug()
        )),
        None => Err("no grant_type".into()),
    }
}

/// The token response: the placeholders, and the real token's lifetime.
pub(crate) fn respond(
    held: &Held<'_>,
    expires_in: Option<u64>,
    scopes: &[String],
) -> Response<Body> {
    let mut answer = json!({
        "access_token": held.access_token,
        "token_type": "Bearer",
    });
    if let Some(seconds) = expires_in {
        answer["expires_in"] = json!(seconds);
    }
    if let Some(refresh) = held.refresh_token {
        answer["refresh_token"] = json!(refresh);
    }
    if !scopes.is_empty() {
        answer["scope"] = json!(scopes.join(" "));
    }
    let bytes = serde_json::to_vec(&answer).unwrap_or_default();
    let mut response = Response::new(body::full(Bytes::from(bytes)));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    // RFC 6749 §5.1: a token response is never cached.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    const HELD: Held<'static> = Held {
        access_token: "SLUICE_G_ACCESS_0000000000000000",
        refresh_token: Some("SLUICE_G_REFRESH_TOKEN_000000000000"),
        client_secret: Some("SLUICE_G_CLIENT_SECRET_0000000000"),
    };

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, v.parse().unwrap());
        }
        map
    }

    #[test]
    fn what_was_asked_prints_no_credential_and_no_free_text() {
        let asked = Asked {
            grant_type: Some("sk-live-not-a-grant".into()),
            refresh_token: Some("rt-REAL-0123456789".into()),
            client_secret: Some("cs-REAL-0123456789".into()),
        };
        let shown = format!("{asked:?}");
        for value in ["sk-live-not-a-grant", "rt-REAL", "cs-REAL"] {
            assert!(!shown.contains(value), "{shown}");
        }
        assert!(
            shown.contains("<given>") && shown.contains("<other>"),
            "{shown}"
        );
    }

    #[test]
    fn a_refresh_in_a_form_or_in_json_or_with_basic_is_read_and_admitted() {
        let form = b"grant_type=refresh_token&refresh_token=SLUICE_G_REFRESH_TOKEN_000000000000&client_id=c";
        let asked = read(&HeaderMap::new(), form).unwrap();
        assert_eq!(admit(&asked, &HELD), Ok(()));
        let json = br#"{"grant_type":"refresh_token","refresh_token":"SLUICE_G_REFRESH_TOKEN_000000000000","client_secret":"SLUICE_G_CLIENT_SECRET_0000000000"}"#;
        let asked = read(&headers(&[("content-type", "application/json")]), json).unwrap();
        assert_eq!(admit(&asked, &HELD), Ok(()));
        use base64::Engine;
        let basic =
            base64::engine::general_purpose::STANDARD.encode("c:SLUICE_G_CLIENT_SECRET_0000000000");
        let asked = read(
            &headers(&[("authorization", &format!("Basic {basic}"))]),
            b"grant_type=client_credentials",
        )
        .unwrap();
        assert_eq!(admit(&asked, &HELD), Ok(()));
    }

    #[test]
    fn anything_but_the_secrets_own_placeholders_is_refused() {
        let cases: [&[u8]; 5] = [
            b"grant_type=refresh_token&refresh_token=real-refresh-token",
            b"grant_type=refresh_token",
            b"grant_type=password&username=a&password=b",
            b"refresh_token=SLUICE_G_REFRESH_TOKEN_000000000000",
            b"grant_type=refresh_token&refresh_token=SLUICE_G_REFRESH_TOKEN_000000000000&client_secret=wrong",
        ];
        for body in cases {
            let asked = read(&HeaderMap::new(), body).unwrap();
            assert!(
                admit(&asked, &HELD).is_err(),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        let json = headers(&[("content-type", "application/json")]);
        assert!(read(&json, b"grant_type=refresh_token").is_err());
    }

    #[test]
    fn the_answer_holds_placeholders_and_the_real_lifetime() {
        let response = respond(&HELD, Some(3599), &["a".into(), "b".into()]);
        assert_eq!(response.headers()[header::CACHE_CONTROL], "no-store");
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let bytes = rt.block_on(async {
            use http_body_util::BodyExt;
            response.into_body().collect().await.unwrap().to_bytes()
        });
        let value: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(value["access_token"], HELD.access_token);
        assert_eq!(value["refresh_token"], HELD.refresh_token.unwrap());
        assert_eq!(value["expires_in"], 3599);
        assert_eq!(value["token_type"], "Bearer");
        assert_eq!(value["scope"], "a b");
    }
}
