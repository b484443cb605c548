//! The pinning step: a request that swaps a secret with `pin:` (or, streaming its body,
//! may swap one) must go over a connection whose verified chain holds one of its pins.
//! This step only says which pins the request needs; the upstream leg (`upstream::pinned`)
//! dials and verifies, and a chain without them fails the handshake before anything of
//! the request is written (`502 pin-mismatch`).

use sluice_guard::SecretId;

use super::budget::BodySwaps;
use crate::generation::shared::Shared;
use crate::upstream::{PinDemand, PinSet};

/// The pins the request's connection must meet: those of every pinned secret swapped in
/// `head`, and in `body` (every one a streamed body may swap). `None` when it carries no
/// pinned secret, the case of every request in a run without `pin:`.
pub(crate) fn demand(shared: &Shared, head: &[SecretId], body: &BodySwaps) -> Option<PinDemand> {
    if !shared.policy.has_pins() {
        return None;
    }
    let body = match body {
        BodySwaps::Known(ids) | BodySwaps::Streaming(ids) => ids,
    };
    let sets = head
        .iter()
        .chain(body)
        .filter_map(|&id| shared.policy.secret(shared.guard.name(id)))
        .filter(|secret| !secret.pins().is_empty())
        .map(|secret| PinSet {
            secret: secret.name().to_owned(),
            pins: secret.pins().to_vec(),
        })
        .collect();
    PinDemand::new(sets)
}
