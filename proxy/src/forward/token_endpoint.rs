//! The token endpoint of a minted secret, as the sandbox reaches it: answered by sluice.
//!
//! A request toward a minted secret's `token_url` (its host, port and path) never reaches
//! the identity provider: a refresh or client-credentials grant carrying the secret's
//! placeholders gets a token response of placeholders (`crate::mint::answer`), with the
//! real token's lifetime, minted first if need be; anything else is refused. So a client
//! that refreshes by itself keeps working, and holds placeholders only.

use std::sync::Arc;

use http::request::Parts;
use http::{Method, Response};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use sluice_audit::EventKind;
use sluice_policies::{MintPart, MinterDecl, Policy, mint_part_name};

use crate::body::Body;
use crate::generation::door::Exchange;
use crate::generation::minted;
use crate::generation::shared::Shared;
use crate::mint::answer::{self, Held, MAX_TOKEN_REQUEST};
use crate::refusal::Refusal;
use crate::tls::target::Target;

/// The minted secret whose token endpoint this request names, if any.
pub(super) fn minter_for<'p>(
    policy: &'p Policy,
    target: &Target,
    parts: &Parts,
) -> Option<&'p MinterDecl> {
    policy.minters().iter().find(|minter| {
        let url = minter.token_url();
        url.host() == target.host && url.port() == target.port && url.path() == parts.uri.path()
    })
}

/// Answers the sandbox's token request for `minter`, or refuses it.
pub(super) async fn answer(
    parts: Parts,
    incoming: Incoming,
    minter: &MinterDecl,
    shared: &Arc<Shared>,
    exchange: &Exchange,
) -> Result<Response<Body>, Refusal> {
    let name = minter.name();
    if parts.method != Method::POST {
        return Err(Refusal::token_request_refused(
            name,
            "a token request is a POST",
        ));
    }
    let limited = http_body_util::Limited::new(incoming, MAX_TOKEN_REQUEST);
    let collected = tokio::time::timeout(shared.limits.body_read_timeout, limited.collect())
        .await
        .map_err(|_| Refusal::token_request_refused(name, "its body did not arrive in time"))?
        .map_err(|_| {
            Refusal::token_request_refused(name, "its body is over 16 KiB, or was cut short")
        })?;
    let asked = answer::read(&parts.headers, &collected.to_bytes())
        .map_err(|why| Refusal::token_request_refused(name, why))?;
    let placeholder = |part| {
        let index = minter.part(part)?;
        let secret = &shared.policy.secrets()[index];
        let id = shared.guard.id(secret.name())?;
        Some(shared.guard.placeholder(id).as_str().to_owned())
    };
    let (access, refresh, secret) = (
        placeholder(MintPart::AccessToken),
        placeholder(MintPart::RefreshToken),
        placeholder(MintPart::ClientSecret),
    );
    let Some(access) = access else {
        return Err(Refusal::token_request_refused(
            name,
            "the secret has no placeholder in this generation",
        ));
    };
    let held = Held {
        access_token: &access,
        refresh_token: refresh.as_deref(),
        client_secret: secret.as_deref(),
    };
    answer::admit(&asked, &held).map_err(|why| Refusal::token_request_refused(name, &why))?;
    let token = minted::token(shared, minter).await?;
    let response = answer::respond(
        &held,
        token.expires_in(std::time::Instant::now()),
        minter.scopes(),
    );
    exchange.record(exchange.event(EventKind::Mint).secret(name).reason(format!(
        "answered the sandbox's {} request with placeholders ({})",
        asked.grant_type.as_deref().unwrap_or_default(),
        mint_part_name(name, MintPart::AccessToken)
    )));
    Ok(response)
}
