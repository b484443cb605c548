//! The budget step: a request that swaps a secret with a `budget:` is charged one use of
//! it before anything of it leaves, and a secret whose window is used up is refused with
//! `429` and `Retry-After`. The ledger (`sluice_policies::BudgetLedger`) decides; this step
//! only says what the request swapped. `forward` charges it per request, the WebSocket
//! relay per message.
//!
//! A body read whole says exactly what it swapped. A streamed body is charged before it
//! starts for every budgeted secret its plan could swap there, and gives back, when it
//! ends, each use it did not make: a used-up budget refuses such a request even when its
//! body would not have held the placeholder, and never lets one more swap through.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use sluice_guard::{Guard, SecretId, Tally};
use sluice_policies::Charge;

use crate::generation::shared::Shared;
use crate::refusal::Refusal;

/// What a request body's scan found it swaps, or may swap as it streams.
#[derive(Debug)]
pub(crate) enum BodySwaps {
    /// Read whole, or absent: these secrets were swapped into it.
    Known(Vec<SecretId>),
    /// Streamed: its plan swaps these secrets wherever their placeholders turn up.
    Streaming(Vec<SecretId>),
}

/// The secrets swapped somewhere in `tally`.
pub(crate) fn swapped(tally: &Tally) -> impl Iterator<Item = SecretId> + '_ {
    tally
        .iter()
        .filter(|(_, counts)| counts.swapped > 0)
        .map(|(id, _)| id)
}

/// Where a streamed body's charge waits for the body to end (or be dropped, which gives
/// every use back).
#[derive(Clone, Default)]
pub(crate) struct Pending(Arc<Mutex<Option<Charge>>>);

impl Pending {
    /// `report` (a body's reporter), first settling the charge left here: the uses of the
    /// secrets the body swapped stand, the others are given back.
    pub(crate) fn settling<R>(
        &self,
        guard: Arc<Guard>,
        report: R,
    ) -> impl FnOnce(&Tally, Option<Refusal>, u64) + Send + 'static
    where
        R: FnOnce(&Tally, Option<Refusal>, u64) + Send + 'static,
    {
        let slot = self.0.clone();
        move |tally: &Tally, cut: Option<Refusal>, scanned: u64| {
            let charge = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(charge) = charge {
                charge
                    .commit_used(|name| guard.id(name).is_some_and(|id| tally.get(id).swapped > 0));
            }
            report(tally, cut, scanned);
        }
    }

    fn leave(&self, charge: Charge) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(charge);
    }
}

/// Charges the request's uses: those of `head` and of a body read whole for good, those a
/// streamed body may make until it ends.
///
/// # Errors
///
/// `429` naming the first secret whose budget is used up; nothing is charged then.
pub(crate) fn charge(
    shared: &Shared,
    head: &[SecretId],
    body: BodySwaps,
    pending: &Pending,
) -> Result<(), Refusal> {
    let (known, streaming) = match body {
        BodySwaps::Known(ids) => (ids, Vec::new()),
        BodySwaps::Streaming(ids) => (Vec::new(), ids),
    };
    // Most runs budget nothing: no lookup, no lock.
    if !shared.policy.has_budgets() || (head.is_empty() && known.is_empty() && streaming.is_empty())
    {
        return Ok(());
    }
    let indexes = |ids: &mut dyn Iterator<Item = &SecretId>| -> Vec<usize> {
        let mut out: Vec<usize> = ids
            .filter_map(|&id| shared.policy.secret_index(shared.guard.name(id)))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    };
    let now = Instant::now();
    let made = indexes(&mut head.iter().chain(&known));
    let made = shared
        .budgets
        .charge(&shared.policy, &made, now)
        .map_err(|e| Refusal::budget_exhausted(&e, "request"))?;
    let may = indexes(&mut streaming.iter().filter(|id| !head.contains(id)));
    // Dropping `made` on this error gives its uses back.
    let may = shared
        .budgets
        .charge(&shared.policy, &may, now)
        .map_err(|e| Refusal::budget_exhausted(&e, "body"))?;
    made.commit();
    if !may.is_empty() {
        pending.leave(may);
    }
    Ok(())
}
