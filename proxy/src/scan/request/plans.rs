//! From grants to plans: for each place of a request, the grant decision of every secret
//! (`sluice-policies`) written into the guard's [`Plan`]. A tunnel has one target, so a
//! place's plan is decided once per tunnel ([`PlanCache`]); only the request rules of the
//! secrets that have them are weighed per request ([`Ruled`]).

use http::header::CONTENT_TYPE;
use http::request::Parts;
use sluice_guard::{OnPlaceholder, OnValue, Plan, SecretId, SwapForm};
use sluice_policies::{RequestLine, Sink};

use super::{Outbound, Place};

/// Plans already decided for one tunnel, by place: a tunnel has one target, so each place's
/// plan is the same for every request on it and is asked of the grant decision once.
/// Bounded, since header names come from the client.
#[derive(Default)]
pub(crate) struct PlanCache {
    pub(super) plans: std::sync::Mutex<std::collections::HashMap<Place, Plan>>,
    /// The secrets with request rules that are granted toward the tunnel's host: the only
    /// ones whose grant each request's method and path can change.
    ruled: std::sync::OnceLock<Vec<(usize, SecretId)>>,
}

impl PlanCache {
    /// The most places remembered; past it the cache starts over.
    pub(super) const CAPACITY: usize = 256;

    pub(super) fn get_or_insert(&self, key: &Place, make: impl FnOnce() -> Plan) -> Plan {
        let mut plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(plan) = plans.get(key) {
            return plan.clone();
        }
        let plan = make();
        if plans.len() >= Self::CAPACITY {
            plans.clear();
        }
        plans.insert(key.clone(), plan.clone());
        plan
    }
}

/// The request rules' verdict on one request: the secrets whose rules refuse it keep no
/// swap, whatever the cached plans say.
pub(super) struct Ruled {
    pub(super) method: String,
    /// The normalised path, which the rules read.
    pub(super) path: String,
    /// Secrets granted toward the host whose rules do not admit this request.
    pub(super) refused: Vec<SecretId>,
    /// Whether the request must leave with the normalised path: a rule admitted a secret
    /// into it, so the upstream gets the path that rule matched.
    pub(super) send_normalised: bool,
    /// Whether the target is `egress.verbatim`, asked once for every place's plan.
    pub(super) verbatim: bool,
}

impl<'a> Outbound<'a> {
    /// Weighs the request rules of the secrets granted toward the target against this
    /// request's method and path (without the query), once, for every place's plan.
    pub(crate) fn for_request(self, method: &http::Method, path: &str) -> Self {
        let mut computed = None;
        let ruled_here = match self.cache {
            Some(cache) => cache.ruled.get_or_init(|| self.ruled_here()),
            None => computed.insert(self.ruled_here()),
        };
        if ruled_here.is_empty() {
            return self;
        }
        let line = RequestLine::new(method.as_str(), path);
        let secrets = self.policy.secrets();
        let refused: Vec<SecretId> = ruled_here
            .iter()
            .filter(|(index, _)| secrets[*index].rules().is_some_and(|r| !r.admits(&line)))
            .map(|(_, id)| *id)
            .collect();
        let ruled = Ruled {
            method: line.method().to_owned(),
            path: line.path().to_owned(),
            send_normalised: line.was_changed() && refused.len() < ruled_here.len(),
            refused,
            verbatim: self.policy.is_verbatim(&self.target.host, self.target.port),
        };
        Self {
            ruled: Some(ruled),
            ..self
        }
    }
    /// The secrets with request rules whose placeholders may be swapped toward the target
    /// somewhere in a request.
    fn ruled_here(&self) -> Vec<(usize, SecretId)> {
        let (host, port) = (self.target.host.as_str(), self.target.port);
        if self.plain {
            return Vec::new();
        }
        self.policy
            .ruled_secrets()
            .iter()
            .filter(|&&index| {
                let name = self.policy.secrets()[index].name();
                self.policy.may_reach(name, host, port).is_ok()
            })
            .filter_map(|&index| {
                let id = self.guard.id(self.policy.secrets()[index].name())?;
                Some((index, id))
            })
            .collect()
    }
    /// The plan for one place: asks the grant decision once per secret (once per tunnel,
    /// with a cache).
    pub(crate) fn plan(&self, place: &Place) -> Plan {
        let mut plan = match self.cache {
            Some(cache) => cache.get_or_insert(place, || self.decide(place)),
            None => self.decide(place),
        };
        // A placeholder the request rules refuse is treated as any ungranted one: kept on a
        // verbatim host, refused elsewhere.
        if let Some(ruled) = &self.ruled {
            let verbatim = ruled.verbatim;
            for &id in &ruled.refused {
                if plan.on_placeholder(id) == OnPlaceholder::Swap {
                    let on_value = plan.on_value(id);
                    let keep = if verbatim {
                        OnPlaceholder::Keep
                    } else {
                        OnPlaceholder::Refuse
                    };
                    plan.set(id, keep, on_value);
                }
            }
        }
        plan
    }
    /// Asks the grant decision, once per secret; cached per tunnel by [`Outbound::plan`].
    fn decide(&self, place: &Place) -> Plan {
        let (host, port) = (self.target.host.as_str(), self.target.port);
        let verbatim = self.policy.is_verbatim(host, port);
        if self.plain {
            let mut plan = Plan::refuse_all(self.guard);
            if verbatim {
                for id in self.guard.ids() {
                    plan.set(id, OnPlaceholder::Keep, OnValue::Refuse);
                }
            }
            return plan;
        }
        let location = place.location();
        let mut plan = Plan::refuse_all(self.guard);
        for id in self.guard.ids() {
            let name = self.guard.name(id);
            // A verbatim host is a model boundary: its requests carry the conversation, and
            // a value once quoted there is replaced by its placeholder rather than refused
            // (the model never reads it, and later turns do not all fail).
            let on_value = match self.policy.may_reach(name, host, port) {
                Ok(_) => OnValue::Keep,
                Err(_) if verbatim => OnValue::Redact,
                Err(_) => OnValue::Refuse,
            };
            let granted = location.as_ref().is_some_and(|loc| {
                self.policy
                    .may_place(name, Sink::Egress, host, port, loc)
                    .is_ok()
            });
            let on_placeholder = if granted {
                OnPlaceholder::Swap
            } else if verbatim {
                OnPlaceholder::Keep
            } else {
                OnPlaceholder::Refuse
            };
            plan.set(id, on_placeholder, on_value);
        }
        plan
    }
    /// The plan for the body, writing swapped values in the form the body's content type
    /// needs (JSON-escaped in JSON, form-encoded in form bodies).
    pub(crate) fn body_plan(&self, parts: &Parts) -> Plan {
        let content_type = parts
            .headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        let form = if content_type.contains("json") {
            SwapForm::Json
        } else if content_type.starts_with("application/x-www-form-urlencoded") {
            SwapForm::Form
        } else {
            SwapForm::Raw
        };
        self.plan(&Place::Body).with_swap_form(form)
    }
}
