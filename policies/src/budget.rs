//! Budgets: how many requests a secret may be swapped into per window (`budget:`), and the
//! run's ledger of what each has used.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use sluice_policies::{BudgetLedger, Policy};
//!
//! let yaml = "version: 1
//! secrets:
//!   gh:
//!     from: { env: GH }
//!     hosts: [api.github.com]
//!     sinks: [egress]
//!     budget: { requests: 2, per: 1h }
//! ";
//! let policy = Policy::parse(yaml, "policy.yaml").unwrap().policy;
//! let ledger = BudgetLedger::new();
//! let now = Instant::now();
//! ledger.charge(&policy, &[0], now).unwrap().commit();
//! ledger.charge(&policy, &[0], now).unwrap().commit();
//! let exhausted = ledger.charge(&policy, &[0], now).unwrap_err();
//! assert_eq!(exhausted.resets_in, Duration::from_secs(3600));
//! // A new window opens when the first one has run out.
//! assert!(ledger.charge(&policy, &[0], now + Duration::from_secs(3600)).is_ok());
//! ```
//!
//! The ledger is the decision: a use is charged before the request that makes it leaves,
//! all of a request's secrets or none. Windows are fixed: one opens with the first use
//! after the last one ran out, and lasts `per`. It is kept by secret name, so a reload keeps
//! what was used (and applies the new numbers to it). It holds names and counts, never a
//! value.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::model::Budget;
use crate::policy::Policy;

/// One secret's current window.
#[derive(Clone, Copy, Debug)]
struct Window {
    opened: Instant,
    used: u64,
}

/// What every secret with a budget has used this run, shared by every connection.
#[derive(Debug, Default)]
pub struct BudgetLedger {
    windows: Mutex<HashMap<String, Window>>,
}

/// A refused charge: the secret's budget is used up until `resets_in` from now.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "secret {secret} has used its budget of {budget}; it resets in {}s, or raise secrets.{secret}.budget",
    resets_in.as_secs().max(1)
)]
pub struct Exhausted {
    /// The secret.
    pub secret: String,
    /// Its budget.
    pub budget: Budget,
    /// When its window closes, from the moment of the refused charge.
    pub resets_in: Duration,
}

impl BudgetLedger {
    /// An empty ledger, for one run.
    pub fn new() -> Arc<BudgetLedger> {
        Arc::new(BudgetLedger::default())
    }

    /// Charges one use to each secret at `secrets` (indexes in [`Policy::secrets`]; those
    /// without a budget are free) at `now`: all of them, or none when one is used up. The
    /// uses stand unless the returned [`Charge`] is dropped without
    /// [`Charge::commit`]: a request that did not leave gives them back.
    ///
    /// # Errors
    ///
    /// [`Exhausted`] for the first secret whose window has no use left.
    ///
    /// # Panics
    ///
    /// When an index is not one of [`Policy::secrets`].
    pub fn charge(
        self: &Arc<Self>,
        policy: &Policy,
        secrets: &[usize],
        now: Instant,
    ) -> Result<Charge, Exhausted> {
        let budgeted: Vec<(&str, Budget)> = secrets
            .iter()
            .filter_map(|&i| {
                let decl = &policy.secrets()[i];
                decl.budget().map(|b| (decl.name(), b))
            })
            .collect();
        if budgeted.is_empty() {
            return Ok(Charge {
                ledger: self.clone(),
                held: Vec::new(),
            });
        }
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        for &(name, budget) in &budgeted {
            if let Some(window) = windows
                .get(name)
                .copied()
                .filter(|w| is_open(w, budget, now))
                && window.used >= budget.requests
            {
                return Err(Exhausted {
                    secret: name.to_owned(),
                    budget,
                    resets_in: (window.opened + budget.per).saturating_duration_since(now),
                });
            }
        }
        let mut held = Vec::with_capacity(budgeted.len());
        for (name, budget) in budgeted {
            let window = windows.entry(name.to_owned()).or_insert(Window {
                opened: now,
                used: 0,
            });
            if !is_open(window, budget, now) {
                *window = Window {
                    opened: now,
                    used: 0,
                };
            }
            window.used += 1;
            held.push((name.to_owned(), window.opened));
        }
        Ok(Charge {
            ledger: self.clone(),
            held,
        })
    }

    /// Each budgeted secret of `policy` with what it has used of its window at `now`, for
    /// the metrics: `(name, used, budget)`.
    pub fn usage(&self, policy: &Policy, now: Instant) -> Vec<(String, u64, Budget)> {
        let windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        policy
            .secrets()
            .iter()
            .filter_map(|decl| {
                let budget = decl.budget()?;
                let used = windows
                    .get(decl.name())
                    .filter(|w| is_open(w, budget, now))
                    .map_or(0, |w| w.used);
                Some((decl.name().to_owned(), used, budget))
            })
            .collect()
    }

    fn give_back(&self, name: &str, opened: Instant) {
        let mut windows = self.windows.lock().unwrap_or_else(|e| e.into_inner());
        // A window that closed meanwhile owes nothing back.
        if let Some(window) = windows.get_mut(name).filter(|w| w.opened == opened) {
            window.used = window.used.saturating_sub(1);
        }
    }
}

fn is_open(window: &Window, budget: Budget, now: Instant) -> bool {
    now < window.opened + budget.per
}

/// Uses charged for one request: given back when dropped, unless committed.
#[derive(Debug)]
pub struct Charge {
    ledger: Arc<BudgetLedger>,
    held: Vec<(String, Instant)>,
}

impl Charge {
    /// Keeps every use: the request left.
    pub fn commit(mut self) {
        self.held.clear();
    }

    /// Keeps the uses of the secrets `used` says were used, and gives back the rest (a
    /// streamed body charged for a swap it never made).
    pub fn commit_used(mut self, used: impl Fn(&str) -> bool) {
        self.held.retain(|(name, _)| !used(name));
    }

    /// Whether it charged nothing (no secret of the request has a budget).
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        for (name, opened) in self.held.drain(..) {
            self.ledger.give_back(&name, opened);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(requests: u64) -> Policy {
        let yaml = format!(
            "version: 1\nsecrets:\n  a:\n    from: {{ env: A }}\n    hosts: [a.test]\n    sinks: [egress]\n    budget: {{ requests: {requests}, per: 10s }}\n  b:\n    from: {{ env: B }}\n    hosts: [a.test]\n    sinks: [egress]\n    budget: {{ requests: 1, per: 1m }}\n  free:\n    from: {{ env: F }}\n    hosts: [a.test]\n    sinks: [egress]\n"
        );
        Policy::parse(&yaml, "t.yaml").unwrap().policy
    }

    #[test]
    fn a_request_is_charged_all_of_its_secrets_or_none() {
        let p = policy(5);
        let ledger = BudgetLedger::new();
        let t = Instant::now();
        ledger.charge(&p, &[1], t).unwrap().commit();
        // `b` is used up: a request swapping `a` and `b` takes nothing from `a`.
        let refused = ledger.charge(&p, &[0, 1, 2], t).unwrap_err();
        assert_eq!(refused.secret, "b");
        assert_eq!(refused.resets_in, Duration::from_secs(60));
        assert_eq!(
            ledger.usage(&p, t)[0],
            ("a".into(), 0, p.secrets()[0].budget().unwrap())
        );
        // A secret without a budget is free.
        assert!(ledger.charge(&p, &[2], t).unwrap().is_empty());
    }

    #[test]
    fn uses_not_committed_are_given_back_and_windows_reset() {
        let p = policy(2);
        let ledger = BudgetLedger::new();
        let t = Instant::now();
        drop(ledger.charge(&p, &[0], t).unwrap());
        ledger.charge(&p, &[0], t).unwrap().commit();
        ledger
            .charge(&p, &[0, 1], t)
            .unwrap()
            .commit_used(|name| name == "a");
        assert_eq!(ledger.usage(&p, t)[0].1, 2);
        assert_eq!(ledger.usage(&p, t)[1].1, 0, "b was given back");
        let later = t + Duration::from_secs(4);
        let refused = ledger.charge(&p, &[0], later).unwrap_err();
        assert_eq!(refused.resets_in, Duration::from_secs(6));
        assert!(
            refused
                .to_string()
                .contains("budget of 2 requests per 10s; it resets in 6s")
        );
        // The window closes 10 s after it opened, and the next use opens another.
        let next = t + Duration::from_secs(10);
        assert_eq!(ledger.usage(&p, next)[0].1, 0);
        // A use given back after its window closed owes nothing to the one after it.
        let ledger = BudgetLedger::new();
        let late = ledger.charge(&p, &[0], t).unwrap();
        ledger.charge(&p, &[0], next).unwrap().commit();
        drop(late);
        assert_eq!(ledger.usage(&p, next)[0].1, 1);
    }
}
