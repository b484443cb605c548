//! The door: what the audit log is told about one exchange, and the one path every refusal
//! and every denial takes, answered or not.
//!
//! An [`Exchange`] is made at the start of each step that can refuse (the listener, a
//! CONNECT, a captured connection, a lookup in the jail's resolver, a request inside a
//! tunnel, a plain request), from what the client sent before
//! anything was rewritten, so the path logged is the one the client sent. Every refusal
//! goes through [`Exchange::refuse`]: the audit event (its kind chosen by the refusal's
//! [`Code`](crate::refusal::Code)), a log line saying who was at fault, then the response
//! through the guard; a refusal no response can carry (a handshake refused, a captured
//! connection closed, a name answered NXDOMAIN) takes [`Exchange::record_refusal`], the
//! same event, code and count without the response. Nothing else writes a `refuse` or
//! `deny` event, so the same decision reads the same on every edge, and no step can forget
//! to audit or count one.
//!
//! It never writes a value: events carry secret names, and the audit log's redactor passes
//! every free-text field (host, path) through the guard.

use std::sync::Arc;

use http::request::Parts;
use http::{Response, StatusCode};
use sluice_guard::Tally;

use crate::body::Body;
use crate::generation::shared::Shared;
use crate::refusal::Refusal;
use sluice_audit::{Event, EventKind};

/// One exchange as the audit log sees it: the host, method and path it is about.
#[derive(Clone)]
pub(crate) struct Exchange {
    shared: Arc<Shared>,
    host: Option<String>,
    method: Option<String>,
    path: Option<String>,
}

impl Exchange {
    /// An exchange with nothing known yet but its method (a request refused before its
    /// target was read).
    pub(crate) fn new(shared: &Arc<Shared>, method: &str) -> Self {
        Self {
            shared: shared.clone(),
            host: None,
            method: Some(method.to_owned()),
            path: None,
        }
    }

    /// A lookup of `name` in the jail's resolver: no method, no path.
    pub(crate) fn lookup(shared: &Arc<Shared>, name: impl Into<String>) -> Self {
        Self {
            shared: shared.clone(),
            host: Some(name.into()),
            method: None,
            path: None,
        }
    }

    /// A request toward `host`, its method and path taken as the client sent them.
    pub(crate) fn of_request(shared: &Arc<Shared>, host: &str, parts: &Parts) -> Self {
        Self::new(shared, parts.method.as_str())
            .host(host)
            .path(parts.uri.path_and_query().map_or("/", |p| p.as_str()))
    }

    /// The same exchange, its events named by `shared`'s guard: a response redacted with
    /// the guard in force ([`Shared::redacting`]) reports under that guard's ids.
    pub(crate) fn under(&self, shared: &Arc<Shared>) -> Self {
        Self {
            shared: shared.clone(),
            ..self.clone()
        }
    }

    /// The path as the client sent it (`/` when none was read).
    pub(crate) fn sent_path(&self) -> &str {
        self.path.as_deref().unwrap_or("/")
    }

    /// The same, about `host` (as sent, or the normalised target).
    pub(crate) fn host(mut self, host: impl Into<String>) -> Self {
        self.host = Some(host.into());
        self
    }

    /// The same, about `path`.
    pub(crate) fn path(mut self, path: impl Into<String>) -> Self {
        self.path = Some(path.into());
        self
    }

    /// An event of `kind` about this exchange.
    pub(crate) fn event(&self, kind: EventKind) -> Event {
        let mut event = Event::new(kind);
        if let Some(method) = &self.method {
            event = event.method(method.as_str());
        }
        if let Some(host) = &self.host {
            event = event.host(host.as_str());
        }
        if let Some(path) = &self.path {
            event = event.path(path.as_str());
        }
        event
    }

    /// Records an event about this exchange.
    pub(crate) fn record(&self, event: Event) {
        self.shared.record(event);
    }

    /// The one refusal path: records the refusal, then builds the response the client gets.
    pub(crate) fn refuse(&self, refusal: Refusal) -> Response<Body> {
        if !refusal.audited {
            self.record_refusal(&refusal);
        }
        // The guard in force, not this exchange's: it holds every value this one does
        // (a reload never forgets one), and any minted or rotated since, which a refusal
        // quoting the upstream (a coding's name, an extension's) may carry.
        refusal.into_response(&self.shared.live.current().guard)
    }

    /// Records a refusal that no response can carry (a streamed body cut after its head
    /// went): the audit event and the log line of [`Exchange::refuse`], nothing on the wire.
    pub(crate) fn record_refusal(&self, refusal: &Refusal) {
        self.record_refusals(refusal, None);
    }

    /// [`Exchange::record_refusal`] for `count` refusals of one decision gathered into one
    /// event (the resolver's repeated refusals of one name): counted `count` times, and the
    /// event carries `count`.
    pub(crate) fn record_refusals(&self, refusal: &Refusal, count: Option<u64>) {
        self.shared
            .counters
            .refusals(refusal.code.as_str(), count.unwrap_or(1));
        let mut event = self
            .event(refusal.code.event_kind())
            .reason(refusal.code.as_str());
        if let Some(count) = count {
            event = event.count(count);
        }
        if let Some(secret) = &refusal.secret {
            event = event.secret(secret.as_str());
        }
        if let Some(location) = &refusal.location {
            event = event.location(location.as_str());
        }
        self.shared.record(event);
        // Names and codes only: the message may quote what the client sent.
        let status = refusal.status.as_u16();
        if refusal.status == StatusCode::PROXY_AUTHENTICATION_REQUIRED {
            tracing::debug!(status, code = %refusal.code, fault = ?refusal.fault, "refused");
        } else {
            tracing::info!(status, code = %refusal.code, fault = ?refusal.fault, "refused");
        }
    }

    /// `swap` and `verbatim` events for what an outbound rewrite did in one place.
    pub(crate) fn record_tally(&self, location: &str, tally: &Tally) {
        for (id, counts) in tally.iter() {
            let name = self.shared.guard.name(id);
            if counts.swapped > 0 {
                self.record(
                    self.event(EventKind::Swap)
                        .secret(name)
                        .location(location)
                        .count(counts.swapped),
                );
            }
            if counts.kept_placeholders > 0 {
                self.record(
                    self.event(EventKind::Verbatim)
                        .secret(name)
                        .location(location)
                        .count(counts.kept_placeholders)
                        .reason("egress.verbatim host: placeholder forwarded unchanged"),
                );
            }
        }
    }

    /// `redact` events for what an inbound rewrite did.
    pub(crate) fn record_redactions(&self, location: &str, tally: &Tally) {
        for (id, counts) in tally.iter() {
            if counts.redacted > 0 {
                self.record(
                    self.event(EventKind::Redact)
                        .secret(self.shared.guard.name(id))
                        .location(location)
                        .count(counts.redacted),
                );
            }
        }
    }

    /// The callback a body reports to when it ends: its tally, and the refusal it was cut
    /// short by, if sluice cut it.
    pub(crate) fn reporter(
        &self,
        location: &'static str,
    ) -> impl FnOnce(&Tally, Option<Refusal>, u64) + Send + 'static {
        let exchange = self.clone();
        move |tally: &Tally, cut: Option<Refusal>, scanned: u64| {
            exchange.shared.counters.scanned(scanned);
            exchange.record_tally(location, tally);
            exchange.record_redactions(location, tally);
            if let Some(refusal) = cut {
                exchange.record_refusal(&refusal);
            }
        }
    }
}
