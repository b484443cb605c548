//! Minted tokens and the generation in force: a chain's token becomes a value of the guard
//! (a generation of its own, the declaration unchanged) before any request is given it,
//! and a request that may carry a minted secret is served under a generation that knows
//! the secret's token.
//!
//! The chains themselves (`crate::mint`) know nothing of generations; this is where the two
//! meet: [`Publisher`] puts a token into the guard and audits the mint, [`ready`] is the
//! request path's step, [`chain_of`] finds or starts a secret's chain from the values the
//! generation read.

use std::sync::Arc;
use std::time::Duration;

use sluice_audit::{Event, EventKind};
use sluice_guard::SecretValue;
use sluice_policies::{
    ClientId, MintPart, MinterDecl, Policy, ResolvedSecret, Source, mint_part_name,
};
use sluice_sign::jwt::RsaKey;
use sluice_sign::jwt::google::ServiceAccount;
use zeroize::Zeroizing;

use crate::generation::shared::Shared;
use crate::mint::chain::Token;
use crate::mint::client::Issued;
use crate::mint::{Chain, MintFailure, Parts, Publish};
use crate::refusal::Refusal;
use crate::tls::target::Target;

/// What a chain tells the generation, for the request (or the refresh) that minted.
pub(crate) struct Publisher(pub(crate) Arc<Shared>);

impl Publish for Publisher {
    fn minted(&self, chain: &Chain, issued: &Issued) -> Result<u64, MintFailure> {
        let access = issued.access_token.as_bytes();
        // A token is swapped into headers: one that could split a header is never used.
        if !SecretValue::new(access.to_vec()).is_header_safe() {
            return Err(MintFailure::NotAToken(
                "an access_token holding CR, LF or NUL",
            ));
        }
        let refresh_name = mint_part_name(&chain.name, MintPart::RefreshToken);
        let mut current: Vec<(&str, &[u8])> = vec![(chain.name.as_str(), access)];
        if let Some(rotated) = &issued.refresh_token {
            current.push((refresh_name.as_str(), rotated.as_bytes()));
        }
        let also: Vec<(&str, &[u8])> = issued
            .id_token
            .iter()
            .map(|id| (chain.name.as_str(), id.as_bytes()))
            .collect();
        match self.0.live.put_minted(&current, &also) {
            Ok(declared) => Ok(declared.generation),
            Err(error) => {
                tracing::warn!(secret = %chain.name, %error, "a minted token could not be put into the guard");
                Err(MintFailure::NotAToken(
                    "a token the guard cannot hold (too short?)",
                ))
            }
        }
    }

    fn audited(&self, chain: &Chain, outcome: Result<&Issued, &MintFailure>) {
        let reason = match outcome {
            Ok(issued) => {
                let mut reason = match issued.expires_in {
                    Some(lifetime) => {
                        format!("minted {}; expires in {}s", chain.grant, lifetime.as_secs())
                    }
                    None => format!("minted {}; no expiry given", chain.grant),
                };
                if !issued.narrower.is_empty() {
                    reason.push_str("; granted less than asked: ");
                    reason.push_str(&issued.narrower.join(", "));
                }
                reason
            }
            Err(failure) => format!("refused {}: {}", chain.grant, failure.code()),
        };
        let result = outcome.map_or_else(MintFailure::code, |_| "ok");
        self.0.counters.mint(&chain.name, result);
        self.0.record(
            Event::new(EventKind::Mint)
                .secret(chain.name.as_str())
                .host(chain.endpoint_host.as_str())
                .reason(reason),
        );
    }

    fn revoked(&self, chain: &Chain, outcome: Result<(), &MintFailure>) {
        let reason = match outcome {
            Ok(()) => format!("revoked the {} token", chain.grant),
            Err(failure) => {
                tracing::warn!(secret = %chain.name, code = failure.code(), "a minted token could not be revoked; it expires on its own");
                format!(
                    "could not revoke the {} token: {}",
                    chain.grant,
                    failure.code()
                )
            }
        };
        self.0.record(
            Event::new(EventKind::Mint)
                .secret(chain.name.as_str())
                .host(chain.endpoint_host.as_str())
                .reason(reason),
        );
    }

    fn waited(&self, _chain: &Chain, took: Duration) {
        self.0.counters.mint_waited(took);
    }
}

/// A `jwt_bearer` secret's key file, read: Google's JSON with an RSA key that signs, for
/// the token endpoint the declaration names (a key file naming another is a mistake that
/// would otherwise show only as the provider's refusal). The words name what is wrong,
/// never a byte of the file.
pub(crate) fn service_account(
    minter: &MinterDecl,
    key_file: &[u8],
) -> Result<ServiceAccount, String> {
    let part = mint_part_name(minter.name(), MintPart::ServiceAccount);
    let account = ServiceAccount::from_json(key_file).map_err(|why| format!("{part}: {why}"))?;
    if let Some(uri) = account.token_uri()
        && uri != minter.token_url().as_str()
    {
        return Err(format!(
            "{part}: the key file is for token endpoint {uri}, not oauth2.token_url {}",
            minter.token_url().as_str()
        ));
    }
    Ok(account)
}

/// A GitHub App's private key, read: an RSA private key in PEM that signs.
fn app_key(minter: &MinterDecl, pem: &[u8]) -> Result<RsaKey, String> {
    let part = mint_part_name(minter.name(), MintPart::PrivateKey);
    RsaKey::from_pem(pem).map_err(|why| format!("{part}: {why}"))
}

/// Every key of a generation about to be built (a `jwt_bearer` key file, a GitHub App's
/// private key), read: a key that cannot sign stops the start (or the reload) instead of
/// failing its first request.
pub(crate) fn check_keys(policy: &Policy, resolved: &[ResolvedSecret]) -> Result<(), String> {
    let value = |minter: &MinterDecl, part| {
        let name = mint_part_name(minter.name(), part);
        resolved.iter().find(|s| s.name == name).map(|s| &s.value)
    };
    for minter in policy.minters() {
        if let Some(key_file) = value(minter, MintPart::ServiceAccount) {
            service_account(minter, key_file)?;
        }
        if let Some(pem) = value(minter, MintPart::PrivateKey) {
            app_key(minter, pem)?;
        }
    }
    Ok(())
}

/// The chain of `minter`, started (on its first use in the run) from the values the
/// generation in force read: the refresh token and client secret from its guard, the
/// client id from its source.
///
/// A snapshot whose declaration is no longer in force (a tunnel opened before a reload) may
/// use a chain that serves its minter, and never starts or replaces one: its minter may be
/// one the reload narrowed (a GitHub App's repositories), and a chain started from it would
/// replace, and revoke, the one in force. Refused instead, so that the client opens a new
/// tunnel.
pub(crate) fn chain_of(shared: &Arc<Shared>, minter: &MinterDecl) -> Result<Arc<Chain>, Refusal> {
    let in_force = shared.live.current();
    if !Arc::ptr_eq(&in_force.policy, &shared.policy) {
        return shared
            .mints
            .serving(minter)
            .ok_or_else(Refusal::outdated_tunnel);
    }
    let (chain, replaced) = shared
        .mints
        .chain(minter, || {
            let decl = |part| minter.part(part).map(|i| &shared.policy.secrets()[i]);
            // The values in force (the same declaration's): a refresh token a mint rotated
            // since this snapshot was taken is the one to start from.
            let guard = &in_force.guard;
            let value = |part| {
                let decl = decl(part)?;
                let id = guard.id(decl.name())?;
                Some(Zeroizing::new(guard.value(id).expose().to_vec()))
            };
            let refresh_file = decl(MintPart::RefreshToken).and_then(|d| match d.source() {
                Source::File(path) => Some(path.clone()),
                _ => None,
            });
            let client_id = match minter.client_id() {
                None => None,
                Some(ClientId::Literal(id)) => Some(Zeroizing::new(id.clone())),
                Some(ClientId::Source(source)) => {
                    let name = format!("{}.client_id", minter.name());
                    let bytes = source.read(&name).map_err(|e| e.to_string())?;
                    Some(Zeroizing::new(
                        String::from_utf8(bytes.to_vec())
                            .map_err(|_| format!("{name} is not UTF-8 text"))?,
                    ))
                }
            };
            let service_account = value(MintPart::ServiceAccount)
                .map(|key_file| service_account(minter, &key_file))
                .transpose()?;
            let app_key = value(MintPart::PrivateKey)
                .map(|pem| app_key(minter, &pem))
                .transpose()?;
            Ok(Parts {
                client_id,
                service_account,
                app_key,
                client_secret: value(MintPart::ClientSecret),
                refresh_token: value(MintPart::RefreshToken),
                refresh_file,
            })
        })
        .map_err(|why: String| {
            Refusal::mint_failed(
                minter.name(),
                &MintFailure::Unusable("a part's source failed"),
                &why,
            )
        })?;
    // A reload changed the chain (a GitHub App's narrowing, say): the token it held is
    // revoked, off the request path.
    if let Some(replaced) = replaced {
        let shared = shared.clone();
        tokio::spawn(async move {
            replaced
                .revoke(&shared.upstream, &Publisher(shared.clone()))
                .await;
        });
    }
    Ok(chain)
}

/// Revokes every revocable token of the run (a GitHub App's): for the end of the run.
pub(crate) async fn revoke_all(shared: &Arc<Shared>) {
    let publisher = Publisher(shared.clone());
    for chain in shared.mints.all() {
        chain.revoke(&shared.upstream, &publisher).await;
    }
}

/// The token of `minter` fit to send now, minted if need be (once, however many wait).
pub(crate) async fn token(
    shared: &Arc<Shared>,
    minter: &MinterDecl,
) -> Result<Arc<Token>, Refusal> {
    let chain = chain_of(shared, minter)?;
    let publisher = || -> Arc<dyn Publish> { Arc::new(Publisher(shared.clone())) };
    chain
        .token(&shared.upstream, publisher)
        .await
        .map_err(|failure| Refusal::mint_failed(minter.name(), &failure, ""))
}

/// A step of the request path, before the head's scan: every minted secret granted toward
/// `target` has a token fit to send, and the request is served under a generation whose
/// guard knows it (the snapshot given, or a newer one of the same declaration). A tunnel
/// opened under a declaration since replaced cannot be given a newer token: refused, so
/// that the client opens a new one.
pub(crate) async fn ready(shared: &Arc<Shared>, target: &Target) -> Result<Arc<Shared>, Refusal> {
    let minters = shared.policy.minters();
    if minters.is_empty() {
        return Ok(shared.clone());
    }
    let mut newest = None;
    for minter in minters {
        if shared
            .policy
            .may_reach(minter.name(), &target.host, target.port)
            .is_err()
        {
            continue;
        }
        let token = token(shared, minter).await?;
        newest = newest.max(Some(token.generation));
    }
    let Some(newest) = newest else {
        return Ok(shared.clone());
    };
    let fresh = shared.values_in_force();
    if fresh.generation < newest {
        return Err(Refusal::outdated_tunnel());
    }
    Ok(fresh)
}
