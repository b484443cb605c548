//! A GitHub App's installation token: minted with the App's JWT, narrowed to the
//! declaration's repositories and permissions, and revoked when the run is done with it.
//!
//! `POST {api}/app/installations/{id}/access_tokens` with `{"repositories": [...],
//! "permissions": {...}}` answers `201` with `{"token", "expires_at", "permissions", ...}`;
//! `DELETE {api}/installation/token` with the token revokes it (`204`). Both go over
//! sluice's upstream leg, as every token request does.
//!
//! A token is used until five minutes before its `expires_at` ([`MARGIN`]), as GitHub
//! advises, so the lifetime handed to the chain is that much shorter. GitHub may grant
//! less than asked (a permission the App was never given): the names are kept for the
//! audit log, never the token. A failure is GitHub's status as a fixed code, never its
//! body.

use std::time::{Duration, SystemTime};

use http::{HeaderValue, Method, Request, StatusCode, header};
use serde::Deserialize;
use sluice_policies::{GithubApp, TokenBody};
use sluice_sign::jwt::RsaKey;
use sluice_sign::jwt::github::app_jwt;
use zeroize::Zeroizing;

use super::client::{Issued, MintFailure, failure, send};
use crate::upstream::Upstream;

/// How long before its `expires_at` a token stops being used.
pub(crate) const MARGIN: Duration = Duration::from_secs(300);

/// GitHub's REST API version sluice speaks.
const API_VERSION: &str = "2022-11-28";

/// GitHub's answer to a token request, as far as sluice reads it.
#[derive(Deserialize)]
struct Answer {
    /// Zeroized however the answer is used (or refused).
    token: Zeroizing<String>,
    expires_at: String,
    #[serde(default)]
    permissions: std::collections::BTreeMap<String, String>,
}

/// Mints an installation token for `app`, signed by `key`.
pub(crate) async fn mint(
    upstream: &Upstream,
    token_url: &str,
    app: &GithubApp,
    key: &RsaKey,
) -> Result<Issued, MintFailure> {
    let now = unix_now();
    let jwt = app_jwt(key, app.app_id(), now)
        .map_err(|_| MintFailure::Unusable("the App's private key does not sign"))?;
    let body = serde_json::json!({
        "repositories": app.repositories(),
        "permissions": app
            .permissions()
            .iter()
            .map(|(name, level)| (name.clone(), serde_json::Value::from(level.as_str())))
            .collect::<serde_json::Map<_, _>>(),
    });
    let authorization = Zeroizing::new(format!("Bearer {}", jwt.as_str()));
    let request = request(Method::POST, token_url, &authorization)?
        .body(serde_json::to_vec(&body).unwrap_or_default())
        .map_err(|_| MintFailure::Unusable("the token URL does not parse"))?;
    let response = send(upstream, request, TokenBody::Form)
        .await
        .map_err(|error| failure(oauth2::RequestTokenError::Request(error)))?;
    if response.status() != StatusCode::CREATED && response.status() != StatusCode::OK {
        return Err(MintFailure::Provider(status_code(response.status())));
    }
    let answer: Answer = serde_json::from_slice(response.body())
        .map_err(|_| MintFailure::NotAToken("not JSON, or no token in it"))?;
    let token = answer.token;
    if token.is_empty() {
        return Err(MintFailure::NotAToken("an empty token"));
    }
    let expires_at = humantime::parse_rfc3339(&answer.expires_at)
        .map_err(|_| MintFailure::NotAToken("an expires_at that is not RFC 3339"))?;
    let lifetime = expires_at
        .duration_since(SystemTime::now())
        .unwrap_or_default()
        .saturating_sub(MARGIN);
    Ok(Issued {
        access_token: token,
        refresh_token: None,
        id_token: None,
        expires_in: Some(lifetime),
        narrower: narrower(app.permissions(), &answer.permissions),
    })
}

/// Revokes `token` (`DELETE /installation/token`).
pub(crate) async fn revoke(
    upstream: &Upstream,
    app: &GithubApp,
    token: &str,
) -> Result<(), MintFailure> {
    let url = format!("{}/installation/token", app.api());
    let authorization = Zeroizing::new(format!("token {token}"));
    let request = request(Method::DELETE, &url, &authorization)?
        .body(Vec::new())
        .map_err(|_| MintFailure::Unusable("the API URL does not parse"))?;
    let response = send(upstream, request, TokenBody::Form)
        .await
        .map_err(|error| failure(oauth2::RequestTokenError::Request(error)))?;
    match response.status() {
        status if status.is_success() => Ok(()),
        status => Err(MintFailure::Provider(status_code(status))),
    }
}

/// A request to GitHub's API, with the headers it asks every client for.
fn request(
    method: Method,
    url: &str,
    authorization: &str,
) -> Result<http::request::Builder, MintFailure> {
    let mut authorization = HeaderValue::from_str(authorization)
        .map_err(|_| MintFailure::Unusable("a credential that cannot be a header"))?;
    authorization.set_sensitive(true);
    Ok(Request::builder()
        .method(method)
        .uri(url)
        .header(header::AUTHORIZATION, authorization)
        .header(
            header::ACCEPT,
            HeaderValue::from_static("application/vnd.github+json"),
        )
        .header(
            "x-github-api-version",
            HeaderValue::from_static(API_VERSION),
        )
        .header(header::USER_AGENT, HeaderValue::from_static("sluice"))
        .header(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        ))
}

/// GitHub's status, as a fixed code for the audit log, the response and the metrics.
fn status_code(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "bad_credentials",
        403 => "forbidden",
        404 => "not_found",
        422 => "validation_failed",
        500..=599 => "server_error",
        _ => "other_error",
    }
}

/// The permissions GitHub granted below the level asked (or not at all), by name.
fn narrower(
    asked: &[(String, String)],
    granted: &std::collections::BTreeMap<String, String>,
) -> Vec<String> {
    let rank = |level: &str| match level {
        "read" => 1,
        "write" => 2,
        "admin" => 3,
        _ => 0,
    };
    asked
        .iter()
        .filter(|(name, level)| granted.get(name).is_none_or(|got| rank(got) < rank(level)))
        .map(|(name, _)| name.clone())
        .collect()
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_permission_granted_lower_or_not_at_all_is_narrower() {
        let asked = vec![
            ("contents".to_owned(), "write".to_owned()),
            ("issues".to_owned(), "read".to_owned()),
            ("pull_requests".to_owned(), "write".to_owned()),
        ];
        let granted = [("contents", "read"), ("pull_requests", "admin")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        assert_eq!(narrower(&asked, &granted), ["contents", "issues"]);
    }

    #[test]
    fn githubs_statuses_are_fixed_codes() {
        assert_eq!(status_code(StatusCode::UNAUTHORIZED), "bad_credentials");
        assert_eq!(
            status_code(StatusCode::UNPROCESSABLE_ENTITY),
            "validation_failed"
        );
        assert_eq!(status_code(StatusCode::IM_A_TEAPOT), "other_error");
    }
}
