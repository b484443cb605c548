//! Minted credentials (`oauth2:`): sluice owns every token chain of the run.
//!
//! A minted secret's value is an access token sluice asks the token endpoint for, on the
//! first request that may carry it, and again before it expires. The sandbox holds only
//! placeholders (the access token's, the refresh token's, the client secret's); a client
//! that refreshes by itself asks sluice, which answers with placeholders.
//!
//! - [`chain`]: one secret's chain: the token in force, the single flight, the refresh
//!   ahead of expiry, the rotation, the backoff after a failure;
//! - [`client`]: sluice's own token request, written by the `oauth2` crate and carried by
//!   sluice's upstream leg, its answer bounded;
//! - [`answer`]: the sandbox's token request, read and answered with placeholders;
//! - [`writeback`]: a rotated refresh token written back to its file.
//!
//! # What it must never do
//!
//! Hand the sandbox a real token, send a refresh token twice, or let a request carry a
//! token the guard does not know yet (a chain publishes a token before anyone can use it).
//! It knows nothing of generations: what a token changes in the guard is the generation's
//! business ([`chain::Publish`]).

pub(crate) mod answer;
pub(crate) mod chain;
pub(crate) mod client;
mod github;
mod writeback;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use sluice_policies::MinterDecl;

pub(crate) use chain::{Chain, Parts, Publish};
pub(crate) use client::MintFailure;

/// Every chain of the run, by secret name: one for every generation and every tunnel.
#[derive(Default)]
pub(crate) struct Mints {
    chains: Mutex<HashMap<String, Arc<Chain>>>,
}

impl Mints {
    /// The chain of `minter`: the one the run has, or a new one from `parts` (when the
    /// secret is new, or a reload changed its endpoint, grant or narrowing), with the chain
    /// it replaced (whose token the caller revokes, where its grant revokes tokens).
    pub(crate) fn chain<E>(
        &self,
        minter: &MinterDecl,
        parts: impl FnOnce() -> Result<Parts, E>,
    ) -> Result<(Arc<Chain>, Option<Arc<Chain>>), E> {
        let mut chains = self.chains.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(chain) = chains.get(minter.name())
            && chain.serves(minter)
        {
            return Ok((chain.clone(), None));
        }
        let chain = Arc::new(Chain::new(minter, parts()?));
        let replaced = chains.insert(minter.name().to_owned(), chain.clone());
        Ok((chain, replaced))
    }

    /// The chain the run has for `minter`, when it serves it as declared; never a new one.
    pub(crate) fn serving(&self, minter: &MinterDecl) -> Option<Arc<Chain>> {
        let chains = self.chains.lock().unwrap_or_else(PoisonError::into_inner);
        chains
            .get(minter.name())
            .filter(|chain| chain.serves(minter))
            .cloned()
    }

    /// Every chain of the run, for revoking their tokens when it ends.
    pub(crate) fn all(&self) -> Vec<Arc<Chain>> {
        let chains = self.chains.lock().unwrap_or_else(PoisonError::into_inner);
        chains.values().cloned().collect()
    }
}
