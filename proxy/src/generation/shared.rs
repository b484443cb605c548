//! What every task of a running proxy shares: the generation of the declaration in force
//! (its guard and signers), the run's credentials and TLS terminator, the upstream leg, the
//! audit log, the counters, the limits, the connection slots and the shutdown signal.
//!
//! This module sits below every step of the request path and imports none of them: a step
//! takes what it needs from [`Shared`] and never reaches back into the one before it.
//!
//! A [`Shared`] is a snapshot of one generation: a connection takes the one in force when
//! it is accepted ([`Shared::current`]) and keeps it to its end, so that a reload never
//! changes the rules halfway through a request or a tunnel.

use std::future::Future;
use std::sync::Arc;

use sluice_guard::Guard;
use sluice_policies::{BudgetLedger, Policy};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

use crate::approval::Approvals;
use crate::auth::Credentials;
use crate::config::Limits;
use crate::generation::reload::Live;
use crate::metrics::Counters;
use crate::mint::Mints;
use crate::refusal::Refusal;
use crate::signing::Signers;
use crate::tls::terminate::Terminator;
use crate::upstream::{AllowIps, Upstream};
use sluice_audit::{AuditLog, Event};

/// Held by every task serving a client connection or a tunnel that came out of it; the
/// connection slot is free again when the last one is dropped.
pub(crate) type ConnSlot = Arc<OwnedSemaphorePermit>;

/// What every task of a running proxy shares: one generation's snapshot (`generation`,
/// `policy`, `guard`, `signers`) and the run's handles. Built whole once, at start; every
/// other is this one with a field or two replaced ([`Shared::for_worker`],
/// [`Shared::current`]).
#[derive(Clone)]
pub(crate) struct Shared {
    /// The generation these three belong to, of those `live` has held.
    pub(crate) generation: u64,
    pub(crate) policy: Arc<Policy>,
    pub(crate) guard: Arc<Guard>,
    pub(crate) signers: Arc<Signers>,
    /// The generation in force, which a reload replaces.
    pub(crate) live: Arc<Live>,
    /// This worker's counters (the metrics).
    pub(crate) counters: Arc<Counters>,
    /// What each budgeted secret has used this run: one ledger for every worker and
    /// every generation, so that a reload keeps the count.
    pub(crate) budgets: Arc<BudgetLedger>,
    /// Every minted secret's token chain: one for every worker and every generation.
    pub(crate) mints: Arc<Mints>,
    /// The uses waiting for approval and the decisions standing for the run: one for every
    /// worker and every generation.
    pub(crate) approvals: Arc<Approvals>,
    pub(crate) credentials: Arc<Credentials>,
    pub(crate) terminator: Arc<Terminator>,
    pub(crate) upstream: Upstream,
    pub(crate) audit: AuditLog,
    pub(crate) limits: Limits,
    pub(crate) connections: Arc<Semaphore>,
    pub(crate) shutdown: watch::Receiver<bool>,
}

impl Shared {
    /// The same, with upstream pools and counters of its own, for one worker thread.
    pub(crate) fn for_worker(&self, counters: Arc<Counters>) -> Shared {
        Shared {
            counters,
            upstream: self.upstream.with_own_pools(),
            ..self.clone()
        }
    }

    /// This snapshot if its generation is still in force, else one of the generation in
    /// force now (sharing everything else): what a newly accepted connection serves under.
    pub(crate) fn current(self: &Arc<Self>) -> Arc<Shared> {
        if self.live.generation() == self.generation {
            return self.clone();
        }
        let declared = self.live.current();
        // Its own address policy and pools: nothing dialled under the generation before is
        // reused under this one. A reload that kept the declaration (a rotated value) keeps
        // the pools: the address policy is the same.
        let upstream = if Arc::ptr_eq(&declared.policy, &self.policy) {
            self.upstream.clone()
        } else {
            // Only the tunnels still open under this generation use its pools now.
            self.upstream.retire();
            self.upstream
                .for_generation(allow_ips(&declared.policy, &self.live))
        };
        Arc::new(Shared {
            generation: declared.generation,
            policy: declared.policy.clone(),
            guard: declared.guard.clone(),
            signers: declared.signers.clone(),
            upstream,
            ..Shared::clone(self)
        })
    }

    /// This snapshot, or, when a newer generation changed values only (a minted token, a
    /// rotated source) under the same declaration, that generation's: what each request of
    /// a tunnel is served under, so that a value known since the tunnel opened is swapped
    /// and redacted in it. The declaration itself never changes halfway through a tunnel.
    pub(crate) fn values_in_force(self: &Arc<Self>) -> Arc<Shared> {
        if self.live.generation() == self.generation {
            return self.clone();
        }
        let declared = self.live.current();
        if !Arc::ptr_eq(&declared.policy, &self.policy) {
            return self.clone();
        }
        Arc::new(Shared {
            generation: declared.generation,
            guard: declared.guard.clone(),
            signers: declared.signers.clone(),
            ..Shared::clone(self)
        })
    }

    /// This snapshot with the guard in force now, when that is not this snapshot's own:
    /// what a response is redacted with. A reload never forgets a value (every later guard
    /// holds every value an earlier one did), so the guard in force redacts all this
    /// snapshot's guard does, and a value a later reload brought in besides: a tunnel
    /// opened before a reload that changed the declaration and a value at once keeps its
    /// declaration, never a blind spot for the new value. Swapping and refusing stay with
    /// this snapshot. `None` (the common case, one load of the generation number): this
    /// snapshot's guard is the one in force.
    pub(crate) fn redacting(&self) -> Option<Arc<Shared>> {
        if self.live.generation() == self.generation {
            return None;
        }
        let guard = self.live.current().guard.clone();
        if Arc::ptr_eq(&guard, &self.guard) {
            return None;
        }
        Some(Arc::new(Shared {
            guard,
            ..self.clone()
        }))
    }

    /// Resolves once a reload has put in force a declaration other than this snapshot's
    /// (or, with `values` too, a guard other than its): what a long-lived connection must
    /// not go on serving under. An HTTP/2 tunnel weighs the declaration only, since each of
    /// its requests takes the values in force ([`Shared::values_in_force`]); a WebSocket,
    /// scanned with one guard for its whole life, weighs the values too.
    pub(crate) async fn replaced(&self, values: bool) {
        let mut reloads = self.live.follow();
        loop {
            let current = self.live.current();
            if !Arc::ptr_eq(&current.policy, &self.policy)
                || (values && !Arc::ptr_eq(&current.guard, &self.guard))
            {
                return;
            }
            if reloads.changed().await.is_err() {
                // The proxy is gone: nothing will replace this generation.
                return std::future::pending().await;
            }
        }
    }

    /// Fail closed: without a working audit log nothing is proxied. Asked by the listener of
    /// every proxy request and by `forward` of every request inside a tunnel.
    pub(crate) fn audit_is_healthy(&self) -> Result<(), Refusal> {
        if self.audit.is_healthy() {
            Ok(())
        } else {
            Err(Refusal::unavailable(
                "sluice's audit log failed; refusing to proxy",
            ))
        }
    }

    /// Records an audit event, and counts it. A failed log is noticed by
    /// `AuditLog::is_healthy`, which every request checks first (fail closed), so the error
    /// needs no handling here.
    pub(crate) fn record(&self, event: Event) {
        self.counters.event(&event);
        if let Err(error) = self.audit.record(event) {
            self.counters.audit_failure();
            tracing::error!(%error, "audit log write failed; sluice now refuses to proxy");
        }
    }
}

/// The address policy a generation dials under: its own `allow_ips`, and the one in force
/// too, so that a reload that narrows `allow_ips` holds at once for every new dial, from
/// tunnels opened before it as well. A reload never widens what an older tunnel may dial.
pub(crate) fn allow_ips(policy: &Arc<Policy>, live: &Arc<Live>) -> AllowIps {
    let (policy, live) = (policy.clone(), live.clone());
    Arc::new(move |ip| policy.ip_allowed(ip) && live.current().policy.ip_allowed(ip))
}

/// Resolves once the proxy is told to stop (at once if it already was).
pub(crate) async fn until_stopped(shutdown: &mut watch::Receiver<bool>) {
    // The guard `wait_for` returns is not Send; drop it here, not across an await.
    let _ = shutdown.wait_for(|stop| *stop).await.map(|_| ());
}

/// A hyper connection that can be asked to finish its in-flight requests and close.
pub(crate) trait Drain: Future {
    /// Stops taking new requests; the connection ends once those in flight are answered.
    fn drain(self: std::pin::Pin<&mut Self>);
}

impl<I, S, B> Drain for hyper::server::conn::http1::UpgradeableConnection<I, S>
where
    S: hyper::service::HttpService<hyper::body::Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    B: hyper::body::Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    fn drain(self: std::pin::Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

impl<I, S, B, E> Drain for hyper::server::conn::http2::Connection<I, S, E>
where
    S: hyper::service::HttpService<hyper::body::Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: hyper::rt::Read + hyper::rt::Write + Unpin,
    B: hyper::body::Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    E: hyper::rt::bounds::Http2ServerConnExec<S::Future, B>,
{
    fn drain(self: std::pin::Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

/// Serves `conn` to its end, or, once the proxy is told to stop, lets its in-flight requests
/// finish and then ends it: the one serve-and-drain loop of every connection sluice serves.
pub(crate) async fn serve_until_stopped<C, E>(conn: C, shutdown: watch::Receiver<bool>, what: &str)
where
    C: Drain<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    serve_until(conn, shutdown, std::future::pending(), what).await;
}

/// The same, draining `conn` also once `replaced` resolves ([`Shared::replaced`]).
///
/// Only for HTTP/2: its `GOAWAY` tells the client which requests were not taken, so that it
/// retries them on a new connection. An HTTP/1.1 connection drained between requests just
/// closes, and a client that was about to send one sees it fail.
pub(crate) async fn serve_until<C, E>(
    conn: C,
    mut shutdown: watch::Receiver<bool>,
    replaced: impl Future<Output = ()>,
    what: &str,
) where
    C: Drain<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    let mut conn = std::pin::pin!(conn);
    let result = tokio::select! {
        result = conn.as_mut() => result,
        () = until_stopped(&mut shutdown) => {
            conn.as_mut().drain();
            conn.await
        }
        () = replaced => {
            tracing::debug!("{what} connection drained: a reload replaced its declaration");
            conn.as_mut().drain();
            conn.await
        }
    };
    if let Err(error) = result {
        tracing::debug!(%error, "{what} connection ended with an error");
    }
}
