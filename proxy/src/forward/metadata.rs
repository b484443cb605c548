//! Google's metadata server, as the sandbox reaches it: answered by sluice, for the run's
//! one Google secret, so that Google's libraries find their credentials with no key file.
//!
//! A plain request to `metadata.google.internal` or 169.254.169.254 (port 80), through the
//! proxy variables or captured by the jail, is never dialled when the declaration has a
//! Google secret ([`sluice_policies::Policy::metadata_minter`]): sluice answers it as the
//! metadata server would, for the paths Google's libraries read:
//!
//! - `/` (the libraries' probe): `200`;
//! - `/computeMetadata/v1/instance/service-accounts/{default|EMAIL}/` (`?recursive=true`),
//!   `…/email`, `…/scopes`: the account (its email from the key file, `default` for a
//!   refresh chain) and the declared scopes;
//! - `…/token`: the access token's placeholder and the real token's `expires_in`, minted
//!   first if need be;
//! - anything else: `404`, as the metadata server answers a path it does not have.
//!
//! As Google's server does, it answers only a request that carries `Metadata-Flavor:
//! Google` and no `X-Forwarded-For` (`403` otherwise), and only `GET`. It must never answer
//! with anything but placeholders, and never send a request on.

use std::sync::Arc;

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderValue, Method, Response, StatusCode, header};
use sluice_audit::EventKind;
use sluice_policies::{METADATA_HOST, METADATA_IP, MinterDecl, Policy};

use crate::body::{self, Body};
use crate::generation::door::Exchange;
use crate::generation::minted;
use crate::generation::shared::Shared;
use crate::refusal::Refusal;

/// The service accounts' root, under which every path answered lies.
const ACCOUNTS: &str = "/computeMetadata/v1/instance/service-accounts/";

/// The minted secret the metadata server answers for, when `parts` is addressed to it and
/// the declaration has one.
pub(super) fn minter_for<'p>(policy: &'p Policy, parts: &Parts) -> Option<&'p MinterDecl> {
    let authority = parts.uri.authority()?;
    let host = authority.host().trim_end_matches('.').to_ascii_lowercase();
    let addressed = (host == METADATA_HOST || host == METADATA_IP)
        && authority.port_u16().is_none_or(|port| port == 80);
    addressed.then(|| policy.metadata_minter()).flatten()
}

/// Answers one request to the metadata server for `minter`.
pub(super) async fn answer(
    parts: &Parts,
    minter: &MinterDecl,
    shared: &Arc<Shared>,
    exchange: &Exchange,
) -> Result<Response<Body>, Refusal> {
    let flavored = parts
        .headers
        .get("metadata-flavor")
        .is_some_and(|v| v.as_bytes() == b"Google");
    if !flavored || parts.headers.contains_key("x-forwarded-for") {
        return Ok(reply(
            StatusCode::FORBIDDEN,
            "text/plain",
            "Missing Metadata-Flavor:Google header, or a forwarded request.\n",
        ));
    }
    if parts.method != Method::GET {
        return Ok(reply(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "Method not allowed\n",
        ));
    }
    let path = parts.uri.path();
    if path == "/" {
        return Ok(reply(StatusCode::OK, "text/plain", "computeMetadata/\n"));
    }
    let Some((account, leaf)) = path
        .strip_prefix(ACCOUNTS)
        .and_then(|rest| rest.split_once('/'))
    else {
        return Ok(not_found());
    };
    let email = minted::chain_of(shared, minter)?
        .client_email()
        .unwrap_or("default")
        .to_owned();
    if account != "default" && account != email {
        return Ok(not_found());
    }
    let scopes = minter.scopes();
    let recursive = parts.uri.query().is_some_and(|q| {
        form_urlencoded::parse(q.as_bytes()).any(|(k, v)| k == "recursive" && v == "true")
    });
    match leaf {
        "" if recursive => {
            let info =
                serde_json::json!({"aliases": ["default"], "email": email, "scopes": scopes});
            Ok(reply(StatusCode::OK, "application/json", &info.to_string()))
        }
        "" => Ok(reply(
            StatusCode::OK,
            "application/text",
            "aliases\nemail\nidentity\nscopes\ntoken\n",
        )),
        "email" => Ok(reply(StatusCode::OK, "application/text", &email)),
        "scopes" => Ok(reply(
            StatusCode::OK,
            "application/text",
            &scopes.iter().map(|s| format!("{s}\n")).collect::<String>(),
        )),
        "token" => token(minter, shared, exchange).await,
        _ => Ok(not_found()),
    }
}

/// The access token's placeholder, with the real token's lifetime.
async fn token(
    minter: &MinterDecl,
    shared: &Arc<Shared>,
    exchange: &Exchange,
) -> Result<Response<Body>, Refusal> {
    let name = minter.name();
    let placeholder = shared
        .guard
        .id(name)
        .map(|id| shared.guard.placeholder(id).as_str().to_owned())
        .ok_or_else(|| {
            Refusal::token_request_refused(name, "the secret has no placeholder in this generation")
        })?;
    let token = minted::token(shared, minter).await?;
    // Google's libraries read `expires_in` as a number they must have: a token with no
    // stated lifetime is given an hour, when sluice refreshes it no sooner anyway.
    let expires_in = token.expires_in(std::time::Instant::now()).unwrap_or(3600);
    let answer = serde_json::json!({
        "access_token": placeholder,
        "expires_in": expires_in,
        "token_type": "Bearer",
    });
    exchange.record(
        exchange
            .event(EventKind::Mint)
            .secret(name)
            .reason("answered the sandbox's metadata-server token request with its placeholder"),
    );
    Ok(reply(
        StatusCode::OK,
        "application/json",
        &answer.to_string(),
    ))
}

fn not_found() -> Response<Body> {
    reply(StatusCode::NOT_FOUND, "text/html", "Not Found\n")
}

/// A response as the metadata server sends one: its `Metadata-Flavor`, never cached.
fn reply(status: StatusCode, content_type: &'static str, text: &str) -> Response<Body> {
    let mut response = Response::new(body::full(Bytes::from(text.to_owned())));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert("metadata-flavor", HeaderValue::from_static("Google"));
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
