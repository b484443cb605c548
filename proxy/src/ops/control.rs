//! What an operator can ask of a running proxy, whichever way they ask (the admin
//! endpoint, `SIGHUP`, the embedding program): read the declaration again, scrape the
//! metrics, tell whether it is ready.
//!
//! It owns the reload's bookkeeping (the `reload` audit event, the counter, the log line)
//! so that every way of asking gets the same; what a reload builds is `reload`'s.

use std::sync::Arc;

use sluice_ca::RunCa;

use crate::approval::{Answered, DecideError, Listed, Verdict};
use crate::generation::reload::{Declared, ReloadError};
use crate::generation::shared::Shared;
use crate::metrics::{Gauges, Metrics};
use sluice_audit::{Approval, Event, EventKind};

/// The operator's handle on a running proxy.
pub(crate) struct Control {
    /// The proxy's own snapshot (on the runtime that started it), for the audit log, the
    /// connection slots and the generation in force.
    shared: Arc<Shared>,
    ca: Arc<RunCa>,
    metrics: Arc<Metrics>,
}

impl Control {
    pub(crate) fn new(shared: Arc<Shared>, ca: Arc<RunCa>, metrics: Arc<Metrics>) -> Self {
        Self {
            shared,
            ca,
            metrics,
        }
    }

    /// Reads the declaration again and puts it in force, or refuses it and keeps the one in
    /// force; audited (`reload`), counted and logged either way. On a task of its own, so
    /// that a caller that goes away (an HTTP client hanging up) cannot leave a reload in
    /// force unaudited.
    pub(crate) async fn reload(self: &Arc<Self>) -> Result<Arc<Declared>, ReloadError> {
        let this = self.clone();
        match tokio::spawn(async move { this.reload_and_record().await }).await {
            Ok(result) => result,
            Err(_) => Err(ReloadError::Declaration {
                first: "the reload task panicked".to_owned(),
                sha256: None,
            }),
        }
    }

    async fn reload_and_record(&self) -> Result<Arc<Declared>, ReloadError> {
        let live = self.shared.live.clone();
        let ca = self.ca.clone();
        // Files, and later commands: never on a worker's thread.
        let result = match tokio::task::spawn_blocking(move || {
            let declared = live.reload(&ca)?;
            // Leaves of hosts the new declaration no longer reaches go.
            ca.retain_leaves(|name| declared.policy.resolvable(name));
            Ok(declared)
        })
        .await
        {
            Ok(result) => result,
            Err(_) => Err(ReloadError::Declaration {
                first: "the reload task panicked".to_owned(),
                sha256: None,
            }),
        };
        let event = Event::new(EventKind::Reload);
        let event = match &result {
            Ok(declared) => {
                tracing::info!(
                    generation = declared.generation,
                    policy_sha256 = declared.policy.sha256_hex(),
                    "declaration reloaded: new connections follow it"
                );
                event
                    .reason("reloaded")
                    .policy_sha256(declared.policy.sha256_hex())
            }
            Err(error) => {
                tracing::warn!(%error, "reload refused: the declaration in force stays");
                let event = event.reason(format!("refused: {error}"));
                match error {
                    ReloadError::Declaration {
                        sha256: Some(sha256),
                        ..
                    } => event.policy_sha256(sha256.as_str()),
                    _ => event,
                }
            }
        };
        self.shared.record(event);
        self.metrics.reload(result.is_ok());
        result
    }

    /// The metrics page as it stands now.
    pub(crate) fn scrape(&self) -> String {
        let shared = &self.shared;
        let max = shared.limits.max_connections;
        let gauges = Gauges {
            connections_open: (max.saturating_sub(shared.connections.available_permits())) as u64,
            upstream_dials: shared.upstream.dials(),
            upstream_idle: shared.upstream.idle_http1(),
            audit_queue: shared.audit.queued() as u64,
            audit_write_failures: shared.audit.write_failures(),
            leaves_cached: self.ca.cached_count() as u64,
            leaves_minted: self.ca.minted_count() as u64,
            secrets: shared.live.current().policy.secrets().len() as u64,
            guard_patterns: shared.live.current().guard.pattern_count() as u64,
            guard_bytes: shared.live.current().guard.memory_usage() as u64,
            audit_healthy: shared.audit.is_healthy(),
            budgets: shared
                .budgets
                .usage(&shared.live.current().policy, std::time::Instant::now())
                .into_iter()
                .map(|(name, used, budget)| (name, used, budget.requests))
                .collect(),
        };
        self.metrics.encode(&gauges)
    }

    /// Why the proxy is not ready to proxy, if it is not: its audit log failed (every
    /// request is then refused), or it is stopping.
    pub(crate) fn not_ready(&self) -> Option<&'static str> {
        if !self.shared.audit.is_healthy() {
            Some("the audit log failed; sluice refuses to proxy")
        } else if *self.shared.shutdown.borrow() {
            Some("sluice is stopping")
        } else {
            None
        }
    }

    /// Records an audit event the admin endpoint saw (a host engine's redactions).
    pub(crate) fn record(&self, event: Event) {
        self.shared.record(event);
    }

    /// The generation in force, for the host engines' routes.
    pub(crate) fn declared(&self) -> Arc<Declared> {
        self.shared.live.current()
    }

    /// Calls `announce` with each use that starts waiting for approval (the webhook).
    pub(crate) fn on_arrival(&self, announce: Box<dyn Fn(Listed) + Send + Sync>) {
        self.shared.approvals.on_arrival(announce);
    }

    /// The uses waiting for approval now, oldest first.
    pub(crate) fn pending_approvals(&self) -> Vec<Listed> {
        self.shared.approvals.list()
    }

    /// Decides the waiting use `id`, and records the decision (`approve`): the one path
    /// every channel's decision takes.
    pub(crate) fn decide(&self, id: u64, verdict: Verdict) -> Result<Answered, DecideError> {
        let (decision, scope, channel) = (verdict.decision, verdict.scope, verdict.channel.clone());
        let answered = self.shared.approvals.decide(id, verdict)?;
        let ask = &answered.ask;
        let mut event = Event::new(EventKind::Approve)
            .host(ask.host.as_str())
            .method(ask.method.as_str());
        // A host's decision (`egress.ask`) names no secret and no path.
        if !ask.secret.is_empty() {
            event = event.secret(ask.secret.as_str());
        }
        if !ask.path.is_empty() {
            event = event.path(ask.path.as_str());
        }
        self.record(event.count(answered.requests as u64).approval(Approval {
            id,
            decision: decision.as_str().to_owned(),
            scope: scope.as_str().to_owned(),
            channel,
            waited_ms: answered.waited.as_millis().try_into().unwrap_or(u64::MAX),
        }));
        tracing::info!(
            id,
            secret = ask.secret.as_str(),
            decision = decision.as_str(),
            scope = scope.as_str(),
            "approval decided"
        );
        Ok(answered)
    }
}
