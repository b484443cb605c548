//! What a running proxy counts, and the Prometheus page (`GET /metrics` on the admin
//! endpoint) that shows it.
//!
//! The request path only adds to the [`Counters`] of its own worker: plain atomics on
//! memory no other core writes, so counting costs no contention. A scrape walks every
//! worker's counters, sums them, and writes the page with `prometheus-client`'s encoder
//! ([`Metrics::encode`]); gauges (connections open, the audit queue, the leaf cache) are
//! read from their owners at that moment.
//!
//! # What it must never do
//!
//! Label a series with anything but what the declaration names or sluice's own fixed
//! sets: secret names, event kinds, refusal codes, reload results. Never a host the
//! sandbox chose, a path, a value or a placeholder: a metric is read by people and systems
//! that must not learn them, and a label the sandbox controls would let it grow the page
//! without bound.

mod histogram;
mod page;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sluice_audit::{Event, EventKind};

pub(crate) use histogram::Histogram;
pub(crate) use page::Gauges;

/// How a use of an approving secret ended: the `result` label of `sluice_approvals_total`.
const APPROVAL_RESULTS: [&str; 4] = ["allowed", "denied", "timed-out", "full"];

/// How many event kinds there are: the width of the per-kind arrays.
const KINDS: usize = EventKind::ALL.len();

/// What one worker counts. Only its own worker adds to it; a scrape reads it.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Audit events by kind, [`EventKind::ALL`] order.
    events: [AtomicU64; KINDS],
    /// Audit events naming a secret, by the secret's name, then by kind. A lock of the
    /// worker's own: uncontended but for a scrape.
    secret_events: Mutex<HashMap<Box<str>, [u64; KINDS]>>,
    /// Refusals by their `sluice-error` code.
    refusals: Mutex<HashMap<&'static str, u64>>,
    /// Uses of an approving secret, by how their wait ended ([`APPROVAL_RESULTS`] order):
    /// atomics, since a decision standing for the run answers one on every request.
    approvals: [AtomicU64; APPROVAL_RESULTS.len()],
    /// Time from a request's arrival to its response head.
    pub(crate) request_duration: Histogram,
    /// Client TLS handshakes completed, and failed.
    tls_handshakes: AtomicU64,
    tls_failures: AtomicU64,
    /// Audit events that could not be queued.
    audit_failures: AtomicU64,
    /// Body bytes the guard scanned (decoded), both ways.
    scanned: AtomicU64,
    /// Token requests sluice made, by the minted secret's name and the result (`ok` or
    /// one of [`crate::mint::MintFailure::code`]'s fixed set).
    mints: Mutex<HashMap<(Box<str>, &'static str), u64>>,
    /// How long requests waited for a token request (those that did not wait are not
    /// observed: a token in force, or refreshed in the background, costs no wait).
    pub(crate) mint_wait: Histogram,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn kind_index(kind: EventKind) -> usize {
    EventKind::ALL
        .iter()
        .position(|k| *k == kind)
        .unwrap_or_default()
}

impl Counters {
    /// Counts an audit event: its kind, and its kind for its secret when it names one.
    pub(crate) fn event(&self, event: &Event) {
        let kind = kind_index(event.kind());
        self.events[kind].fetch_add(1, Ordering::Relaxed);
        if let Some(secret) = event.secret_name() {
            let mut by_secret = lock(&self.secret_events);
            match by_secret.get_mut(secret) {
                Some(counts) => counts[kind] += 1,
                None => {
                    let mut counts = [0; KINDS];
                    counts[kind] = 1;
                    by_secret.insert(secret.into(), counts);
                }
            }
        }
    }

    /// Counts `n` refusals by their code (the `sluice-error` header's value); more than one
    /// when one audit event gathers them (the resolver's repeated refusals of a name).
    pub(crate) fn refusals(&self, code: &'static str, n: u64) {
        *lock(&self.refusals).entry(code).or_default() += n;
    }

    /// Counts a use that waited for approval, by how it ended (`allowed`, `denied`,
    /// `timed-out`, `full`).
    pub(crate) fn approval(&self, result: &'static str) {
        if let Some(i) = APPROVAL_RESULTS.iter().position(|r| *r == result) {
            self.approvals[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a client TLS handshake, completed or not.
    pub(crate) fn tls_handshake(&self, ok: bool) {
        let counter = if ok {
            &self.tls_handshakes
        } else {
            &self.tls_failures
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an audit event that could not be queued.
    pub(crate) fn audit_failure(&self) {
        self.audit_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts body bytes the guard scanned.
    pub(crate) fn scanned(&self, bytes: u64) {
        self.scanned.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Counts a token request for `secret`, by its result.
    pub(crate) fn mint(&self, secret: &str, result: &'static str) {
        let mut mints = lock(&self.mints);
        match mints.get_mut(&(secret.into(), result)) {
            Some(count) => *count += 1,
            None => {
                mints.insert((secret.into(), result), 1);
            }
        }
    }

    /// Records how long a request waited for a token request.
    pub(crate) fn mint_waited(&self, took: Duration) {
        self.mint_wait.observe(took);
    }

    /// Records how long a request took to its response head.
    pub(crate) fn request_took(&self, took: Duration) {
        self.request_duration.observe(took);
    }
}

/// Every worker's counters and the run's own: what a scrape sums.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    workers: Mutex<Vec<Arc<Counters>>>,
    reloads_ok: AtomicU64,
    reloads_refused: AtomicU64,
}

impl Metrics {
    /// Counters for one more worker (or task), summed into every scrape from now on.
    pub(crate) fn worker(&self) -> Arc<Counters> {
        let counters = Arc::new(Counters::default());
        lock(&self.workers).push(counters.clone());
        counters
    }

    /// Counts a reload, in force (`ok`) or refused.
    pub(crate) fn reload(&self, ok: bool) {
        let counter = if ok {
            &self.reloads_ok
        } else {
            &self.reloads_refused
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The sum of every worker's counters now.
    fn sum(&self) -> Sum {
        let mut sum = Sum::default();
        for counters in lock(&self.workers).iter() {
            for (total, count) in sum.events.iter_mut().zip(&counters.events) {
                *total += count.load(Ordering::Relaxed);
            }
            for (secret, counts) in lock(&counters.secret_events).iter() {
                let total = sum
                    .secret_events
                    .entry(secret.to_string())
                    .or_insert([0; KINDS]);
                for (total, count) in total.iter_mut().zip(counts) {
                    *total += count;
                }
            }
            for (code, count) in lock(&counters.refusals).iter() {
                *sum.refusals.entry(code).or_default() += count;
            }
            for (result, count) in APPROVAL_RESULTS.iter().zip(&counters.approvals) {
                let count = count.load(Ordering::Relaxed);
                if count > 0 {
                    *sum.approvals.entry(result).or_default() += count;
                }
            }
            for ((secret, result), count) in lock(&counters.mints).iter() {
                *sum.mints.entry((secret.to_string(), result)).or_default() += count;
            }
            sum.request_duration.add(&counters.request_duration);
            sum.mint_wait.add(&counters.mint_wait);
            sum.tls_handshakes += counters.tls_handshakes.load(Ordering::Relaxed);
            sum.tls_failures += counters.tls_failures.load(Ordering::Relaxed);
            sum.audit_failures += counters.audit_failures.load(Ordering::Relaxed);
            sum.scanned += counters.scanned.load(Ordering::Relaxed);
        }
        sum.reloads_ok = self.reloads_ok.load(Ordering::Relaxed);
        sum.reloads_refused = self.reloads_refused.load(Ordering::Relaxed);
        sum
    }

    /// The page a scrape gets: every counter summed, the gauges as they are now, in
    /// Prometheus's text format (version 0.0.4).
    pub(crate) fn encode(&self, gauges: &Gauges) -> String {
        page::encode(self.sum(), gauges)
    }
}

/// Every worker's counters added up, for one scrape.
#[derive(Debug, Default)]
struct Sum {
    events: [u64; KINDS],
    secret_events: std::collections::BTreeMap<String, [u64; KINDS]>,
    refusals: std::collections::BTreeMap<&'static str, u64>,
    approvals: std::collections::BTreeMap<&'static str, u64>,
    request_duration: histogram::Snapshot,
    mints: std::collections::BTreeMap<(String, &'static str), u64>,
    mint_wait: histogram::Snapshot,
    tls_handshakes: u64,
    tls_failures: u64,
    audit_failures: u64,
    scanned: u64,
    reloads_ok: u64,
    reloads_refused: u64,
}

#[cfg(test)]
mod tests;
