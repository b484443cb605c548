//! One minted secret's chain: the token in force, the real parts that mint the next one,
//! and the rule that one token request is in flight at a time.
//!
//! # Invariants enforced here
//!
//! - **One request at a time.** However many requests wait for a token, one token request
//!   is made: waiters queue on [`Chain::minting`] and find the token minted while they
//!   waited.
//! - **Refreshed before it expires.** A token within its last quarter of life (at most the
//!   last minute) is refreshed in the background while requests go on using it; only a token
//!   within its last tenth (at most five seconds) makes a request wait.
//! - **A refresh token is used once.** A rotated refresh token replaces the old one before
//!   anything else happens, and is written back to its `file` source; a refresh token the
//!   provider refused (`invalid_grant`) is never sent again.
//! - **Failure is not retried per request.** After a failed mint, requests get the same
//!   failure until its backoff (1 s, doubling to 60 s) has passed.
//! - **Known before it is used.** A minted value is handed to [`Publish::minted`] (which
//!   puts it into the guard) before any request can be given it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use sluice_policies::{GithubApp, Grant, MinterDecl, TokenBody};
use sluice_sign::jwt::RsaKey;
use sluice_sign::jwt::google::ServiceAccount;
use zeroize::Zeroizing;

use super::client::{self, Ask, Issued, MintFailure};
use super::writeback;
use crate::upstream::Upstream;

/// The shortest backoff after a failed mint, and the longest.
const BACKOFF: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(60));

/// What a chain tells the rest of the proxy: a token minted (to put into the guard before
/// it is used) and what to audit.
pub(crate) trait Publish: Send + Sync {
    /// A token was minted for `chain`: every value of it must be known (redacted, refused
    /// toward other hosts) from now on. Returns the generation whose guard first knows it;
    /// an error (a token the guard cannot hold) fails the mint, and the token is never used.
    fn minted(&self, chain: &Chain, issued: &Issued) -> Result<u64, MintFailure>;
    /// A mint finished: what was issued (read for its lifetime and narrowing only), or the
    /// failure.
    fn audited(&self, chain: &Chain, outcome: Result<&Issued, &MintFailure>);
    /// A token was revoked (a GitHub App's, when the run or its narrowing ends), or not.
    fn revoked(&self, chain: &Chain, outcome: Result<(), &MintFailure>);
    /// A request waited `took` for the single flight (its token was missing or stale).
    fn waited(&self, chain: &Chain, took: Duration);
}

/// A token in force: when it was minted and expires, and which generation knows it (its
/// value lives in the guard only).
pub(crate) struct Token {
    /// The generation whose guard first knows it: a request is served under this one or
    /// a later one, or not at all.
    pub(crate) generation: u64,
    minted: Instant,
    expires: Option<Instant>,
}

impl Token {
    /// Seconds until it expires (`expires_in` for the sandbox's own token requests).
    pub(crate) fn expires_in(&self, now: Instant) -> Option<u64> {
        self.expires
            .map(|at| at.saturating_duration_since(now).as_secs())
    }

    fn state(&self, now: Instant) -> Freshness {
        let Some(expires) = self.expires else {
            return Freshness::Fresh;
        };
        let lifetime = expires.saturating_duration_since(self.minted);
        let refresh_from = expires - (lifetime / 4).min(Duration::from_secs(60));
        let stale_from = expires - (lifetime / 10).min(Duration::from_secs(5));
        if now >= stale_from {
            Freshness::Stale
        } else if now >= refresh_from {
            Freshness::Refresh
        } else {
            Freshness::Fresh
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Freshness {
    Fresh,
    /// Usable, but the next one should be minted now.
    Refresh,
    /// Too close to its expiry to send: wait for the next one.
    Stale,
}

/// What only the minting task touches: the real parts, and the last failure.
struct Held {
    refresh_token: Option<Zeroizing<Vec<u8>>>,
    client_secret: Option<Zeroizing<Vec<u8>>>,
    /// The refresh token was refused (`invalid_grant`): it is never sent again.
    refresh_spent: bool,
    failed: Option<Failed>,
    /// The token in force, for a grant whose tokens are revoked when the run is done with
    /// them (a GitHub App's); for every other grant, the guard alone holds it.
    revocable: Option<Zeroizing<String>>,
}

struct Failed {
    failure: MintFailure,
    retry_at: Instant,
    backoff: Duration,
}

/// The real parts a chain starts from, read by whoever built the generation.
pub(crate) struct Parts {
    /// None for `jwt_bearer`: the key file names the client.
    pub(crate) client_id: Option<Zeroizing<String>>,
    /// The key that signs a `jwt_bearer` assertion, read from its key file.
    pub(crate) service_account: Option<ServiceAccount>,
    /// The key that signs a GitHub App's JWT.
    pub(crate) app_key: Option<RsaKey>,
    pub(crate) client_secret: Option<Zeroizing<Vec<u8>>>,
    pub(crate) refresh_token: Option<Zeroizing<Vec<u8>>>,
    /// Where a rotated refresh token is written back (its `file` source).
    pub(crate) refresh_file: Option<PathBuf>,
}

/// One minted secret's chain.
pub(crate) struct Chain {
    pub(crate) name: String,
    pub(crate) grant: Grant,
    pub(crate) token_url: String,
    /// The token endpoint's host, for the audit log.
    pub(crate) endpoint_host: String,
    client_id: Option<Zeroizing<String>>,
    service_account: Option<ServiceAccount>,
    github: Option<(GithubApp, RsaKey)>,
    scopes: Vec<String>,
    audience: Option<String>,
    body: TokenBody,
    refresh_file: Option<PathBuf>,
    current: Mutex<Option<Arc<Token>>>,
    /// Held for the whole of a token request: the single flight.
    minting: tokio::sync::Mutex<Held>,
    /// A background refresh is in flight.
    refreshing: AtomicBool,
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chain")
            .field("name", &self.name)
            .field("grant", &self.grant)
            .field("token_url", &self.token_url)
            .finish_non_exhaustive()
    }
}

impl Chain {
    /// A chain for `minter`, starting from `parts`.
    pub(crate) fn new(minter: &MinterDecl, parts: Parts) -> Self {
        Self {
            name: minter.name().to_owned(),
            grant: minter.grant(),
            token_url: minter.token_url().as_str().to_owned(),
            endpoint_host: minter.token_url().host().to_owned(),
            client_id: parts.client_id,
            service_account: parts.service_account,
            github: minter.github().cloned().zip(parts.app_key),
            scopes: minter.scopes().to_vec(),
            audience: minter.audience().map(str::to_owned),
            body: minter.body(),
            refresh_file: parts.refresh_file,
            current: Mutex::new(None),
            minting: tokio::sync::Mutex::new(Held {
                refresh_token: parts.refresh_token,
                client_secret: parts.client_secret,
                refresh_spent: false,
                failed: None,
                revocable: None,
            }),
            refreshing: AtomicBool::new(false),
        }
    }

    /// Whether this chain was built for `minter`'s endpoint and grant (a reload that
    /// changes either starts a new chain).
    pub(crate) fn serves(&self, minter: &MinterDecl) -> bool {
        self.token_url == minter.token_url().as_str()
            && self.grant == minter.grant()
            && self.github.as_ref().map(|(app, _)| app) == minter.github()
    }

    /// Revokes the token in force, for a grant whose tokens are revoked (a GitHub App's);
    /// nothing for the others. Waits for a mint in flight, so that the token it brings is
    /// the one revoked; after this, the chain mints again if asked.
    pub(crate) async fn revoke(&self, upstream: &Upstream, publish: &dyn Publish) {
        let Some((app, _)) = &self.github else {
            return;
        };
        let mut held = self.minting.lock().await;
        let Some(token) = held.revocable.take() else {
            return;
        };
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = None;
        let outcome = super::github::revoke(upstream, app, &token).await;
        publish.revoked(self, outcome.as_ref().map(|_| ()));
    }

    /// The service account's email (`jwt_bearer`): not a secret, what Google's metadata
    /// server says the account is.
    pub(crate) fn client_email(&self) -> Option<&str> {
        self.service_account
            .as_ref()
            .map(ServiceAccount::client_email)
    }

    fn current(&self) -> Option<Arc<Token>> {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A token fit to send now: the one in force, or, when there is none or it is about to
    /// expire, the next one (minted once however many callers wait). A token in its
    /// refresh window is returned at once and the next one minted in the background.
    ///
    /// `publish` is called only when a mint may happen: a request served from the token in
    /// force (nearly every one) allocates nothing.
    pub(crate) async fn token(
        self: &Arc<Self>,
        upstream: &Upstream,
        publish: impl FnOnce() -> Arc<dyn Publish>,
    ) -> Result<Arc<Token>, MintFailure> {
        if let Some(token) = self.current() {
            match token.state(Instant::now()) {
                Freshness::Fresh => return Ok(token),
                Freshness::Refresh => {
                    self.refresh_in_background(upstream, publish);
                    return Ok(token);
                }
                Freshness::Stale => {}
            }
        }
        let publish = publish();
        let waiting = Instant::now();
        let token = self.token_in_flight(upstream, &publish).await;
        publish.waited(self, waiting.elapsed());
        token
    }

    /// The slow path of [`Chain::token`]: wait for the single flight, then use what it
    /// minted, its failure within the backoff, or mint.
    async fn token_in_flight(
        &self,
        upstream: &Upstream,
        publish: &Arc<dyn Publish>,
    ) -> Result<Arc<Token>, MintFailure> {
        let mut held = self.minting.lock().await;
        // Minted while this caller waited: the single flight's answer.
        if let Some(token) = self.current()
            && token.state(Instant::now()) != Freshness::Stale
        {
            return Ok(token);
        }
        if let Some(failed) = &held.failed
            && Instant::now() < failed.retry_at
        {
            return Err(failed.failure.clone());
        }
        self.mint(&mut held, upstream, publish).await
    }

    fn refresh_in_background(
        self: &Arc<Self>,
        upstream: &Upstream,
        publish: impl FnOnce() -> Arc<dyn Publish>,
    ) {
        if self.refreshing.swap(true, Ordering::AcqRel) {
            return;
        }
        let (chain, upstream, publish) = (self.clone(), upstream.clone(), publish());
        tokio::spawn(async move {
            let mut held = chain.minting.lock().await;
            let due = chain
                .current()
                .is_none_or(|t| t.state(Instant::now()) != Freshness::Fresh);
            let backing_off = held
                .failed
                .as_ref()
                .is_some_and(|f| Instant::now() < f.retry_at);
            if due && !backing_off {
                // A failure is recorded in `held` and audited; the requests that need the
                // token find it there.
                let _ = chain.mint(&mut held, &upstream, &publish).await;
            }
            drop(held);
            chain.refreshing.store(false, Ordering::Release);
        });
    }

    /// One token request, with the single flight held.
    async fn mint(
        &self,
        held: &mut Held,
        upstream: &Upstream,
        publish: &Arc<dyn Publish>,
    ) -> Result<Arc<Token>, MintFailure> {
        let result = if held.refresh_spent {
            Err(MintFailure::Provider("invalid_grant"))
        } else {
            let ask = Ask {
                token_url: &self.token_url,
                grant: self.grant,
                client_id: self.client_id.as_deref().map(String::as_str),
                service_account: self.service_account.as_ref(),
                github: self.github.as_ref().map(|(app, key)| (app, key)),
                client_secret: held.client_secret.as_deref().map(Vec::as_slice),
                refresh_token: held.refresh_token.as_deref().map(Vec::as_slice),
                scopes: &self.scopes,
                audience: self.audience.as_deref(),
                body: self.body,
            };
            client::mint(upstream, &ask).await
        };
        let sent_at = Instant::now();
        match result {
            Ok(issued) => {
                // The rotated refresh token first: the old one is dead at the provider now.
                if let Some(rotated) = &issued.refresh_token {
                    held.refresh_token = Some(Zeroizing::new(rotated.as_bytes().to_vec()));
                    if let Some(path) = &self.refresh_file
                        && let Err(why) = writeback::replace(path, rotated.as_bytes())
                    {
                        tracing::warn!(secret = %self.name, path = %path.display(), error = %why,
                            "the rotated refresh token could not be written back; the next run starts from a dead one");
                    }
                }
                let generation = match publish.minted(self, &issued) {
                    Ok(generation) => generation,
                    Err(failure) => return Err(self.failed(held, failure, publish)),
                };
                let token = Arc::new(Token {
                    generation,
                    minted: sent_at,
                    expires: issued.expires_in.map(|d| sent_at + d),
                });
                *self.current.lock().unwrap_or_else(PoisonError::into_inner) = Some(token.clone());
                held.failed = None;
                if self.github.is_some() {
                    held.revocable = Some(issued.access_token.clone());
                }
                publish.audited(self, Ok(&issued));
                Ok(token)
            }
            Err(failure) => Err(self.failed(held, failure, publish)),
        }
    }

    /// Records a failed mint: backoff before the next try, a refused refresh token never
    /// sent again, the audit event.
    fn failed(
        &self,
        held: &mut Held,
        failure: MintFailure,
        publish: &Arc<dyn Publish>,
    ) -> MintFailure {
        if failure == MintFailure::Provider("invalid_grant") && self.grant == Grant::RefreshToken {
            held.refresh_spent = true;
        }
        let backoff = held
            .failed
            .as_ref()
            .map_or(BACKOFF.0, |f| (f.backoff * 2).min(BACKOFF.1));
        held.failed = Some(Failed {
            failure: failure.clone(),
            retry_at: Instant::now() + backoff,
            backoff,
        });
        publish.audited(self, Err(&failure));
        failure
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(lifetime: Option<u64>) -> (Token, Instant) {
        let minted = Instant::now();
        let token = Token {
            generation: 0,
            minted,
            expires: lifetime.map(|s| minted + Duration::from_secs(s)),
        };
        (token, minted)
    }

    #[test]
    fn a_token_is_refreshed_in_its_last_quarter_and_waited_for_in_its_last_tenth() {
        let (t, at) = token(Some(3600));
        assert_eq!(t.state(at), Freshness::Fresh);
        assert_eq!(t.state(at + Duration::from_secs(3539)), Freshness::Fresh);
        assert_eq!(t.state(at + Duration::from_secs(3541)), Freshness::Refresh);
        assert_eq!(t.state(at + Duration::from_secs(3596)), Freshness::Stale);
        let (t, at) = token(Some(4));
        assert_eq!(t.state(at + Duration::from_millis(2900)), Freshness::Fresh);
        assert_eq!(
            t.state(at + Duration::from_millis(3100)),
            Freshness::Refresh
        );
        assert_eq!(t.state(at + Duration::from_millis(3700)), Freshness::Stale);
        assert_eq!(t.expires_in(at + Duration::from_secs(1)), Some(3));
        let (t, at) = token(None);
        assert_eq!(t.state(at + Duration::from_secs(86_400)), Freshness::Fresh);
    }
}
