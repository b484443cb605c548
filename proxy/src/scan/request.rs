//! Outbound: the scan of a request toward an intercepted host.
//!
//! Every part of the request is scanned with the guard: method, path, query, header names
//! and values, body and trailers. What a match becomes is decided per secret, per place, by
//! `sluice-policies`, and written into a guard [`Plan`]:
//!
//! - a placeholder in a place its secret grants, toward a host it grants: swapped;
//! - any other placeholder: refused, unless the host is `egress.verbatim` (kept);
//! - a real value toward a host its secret grants: kept (the sandbox should not hold it,
//!   but it goes where it may go); toward an `egress.verbatim` host (a model boundary):
//!   replaced by its placeholder where the request can be rewritten (query, header values,
//!   body, trailers) and refused where it cannot (method, path, header names); toward any
//!   other host: refused, as exfiltration.
//!
//! Nothing here forwards anything: a refusal is returned before the request leaves.

use http::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use http::request::Parts;
use http::uri::PathAndQuery;
use sluice_guard::{
    Encoding, Form, Guard, GuardError, OnPlaceholder, OnValue, Plan, SecretId, SwapForm, Tally,
};
use sluice_policies::{Location, Policy, RequestLine, Sink, Ungranted};

use crate::refusal::{Code, Refusal};
use crate::scan::basic;
use crate::tls::target::Target;

/// Where in a request a match was found, as the audit log names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Place {
    /// The method.
    Method,
    /// The path (before `?`).
    Path,
    /// The query string.
    Query,
    /// A header's name.
    HeaderName,
    /// A header's value: `header:<name>`.
    Header(HeaderName),
    /// The body.
    Body,
    /// The trailers: never a grantable place (a declaration grants header, query or body),
    /// so placeholders there are refused (kept on a verbatim host), as in the path.
    Trailers,
    /// A WebSocket control frame's payload (ping, pong, a close reason): never grantable.
    WebSocketControl,
}

impl Place {
    /// The grantable location this place is, if any: method, path and header names are
    /// never swapped.
    fn location(&self) -> Option<Location> {
        match self {
            Self::Query => Some(Location::Query),
            Self::Body => Some(Location::Body),
            Self::Header(name) => Some(Location::Header(name.to_string())),
            Self::Method
            | Self::Path
            | Self::HeaderName
            | Self::Trailers
            | Self::WebSocketControl => None,
        }
    }

    /// The `location` field of the audit log.
    pub fn label(&self) -> String {
        match self {
            Self::Method => "method".into(),
            Self::Path => "path".into(),
            Self::Query => "query".into(),
            Self::HeaderName => "header-name".into(),
            Self::Header(name) => format!("header:{name}"),
            Self::Body => "body".into(),
            Self::Trailers => "trailers".into(),
            Self::WebSocketControl => "websocket-control".into(),
        }
    }
}

/// What the outbound scan did in one place: the audit log's `swap` and `verbatim` events.
#[derive(Debug)]
pub struct Swapped {
    /// Where.
    pub place: Place,
    /// Per secret: swapped placeholders, kept placeholders (verbatim), kept values.
    pub tally: Tally,
}

/// Plans already decided for one tunnel, by place: a tunnel has one target, so each place's
/// plan is the same for every request on it and is asked of the grant decision once.
/// Bounded, since header names come from the client.
#[derive(Default)]
pub struct PlanCache {
    plans: std::sync::Mutex<std::collections::HashMap<Place, Plan>>,
    /// The secrets with request rules that are granted toward the tunnel's host: the only
    /// ones whose grant each request's method and path can change.
    ruled: std::sync::OnceLock<Vec<(usize, SecretId)>>,
}

impl PlanCache {
    /// The most places remembered; past it the cache starts over.
    const CAPACITY: usize = 256;

    fn get_or_insert(&self, key: &Place, make: impl FnOnce() -> Plan) -> Plan {
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

/// The outbound scan for one target host: the guard and the grants.
pub struct Outbound<'a> {
    guard: &'a Guard,
    policy: &'a Policy,
    target: &'a Target,
    /// A plain `http://` request: nothing is ever swapped into it, and no value may leave in
    /// it, whatever the grants say.
    plain: bool,
    /// The tunnel's plans, when there is a tunnel.
    cache: Option<&'a PlanCache>,
    /// What the request rules decided for this request, when a secret granted toward the
    /// host has them.
    ruled: Option<Ruled>,
}

/// The request rules' verdict on one request: the secrets whose rules refuse it keep no
/// swap, whatever the cached plans say.
struct Ruled {
    method: String,
    /// The normalised path, which the rules read.
    path: String,
    /// Secrets granted toward the host whose rules do not admit this request.
    refused: Vec<SecretId>,
    /// Whether the request must leave with the normalised path: a rule admitted a secret
    /// into it, so the upstream gets the path that rule matched.
    send_normalised: bool,
    /// Whether the target is `egress.verbatim`, asked once for every place's plan.
    verbatim: bool,
}

impl<'a> Outbound<'a> {
    /// The scan of requests toward `target`.
    pub fn new(guard: &'a Guard, policy: &'a Policy, target: &'a Target) -> Self {
        Self {
            guard,
            policy,
            target,
            plain: false,
            cache: None,
            ruled: None,
        }
    }

    /// Remembers plans in `cache` (one per tunnel) instead of deciding them per request.
    pub fn with_cache(self, cache: &'a PlanCache) -> Self {
        Self {
            cache: Some(cache),
            ..self
        }
    }

    /// Weighs the request rules of the secrets granted toward the target against this
    /// request's method and path (without the query), once, for every place's plan.
    pub fn for_request(self, method: &http::Method, path: &str) -> Self {
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

    /// The scan of plain `http://` requests toward `target`: every placeholder and every
    /// value is refused (a verbatim host keeps its placeholders, which are not secrets).
    pub fn plain(guard: &'a Guard, policy: &'a Policy, target: &'a Target) -> Self {
        Self {
            plain: true,
            ..Self::new(guard, policy, target)
        }
    }

    /// The plan for one place: asks the grant decision once per secret (once per tunnel,
    /// with a cache).
    pub fn plan(&self, place: &Place) -> Plan {
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
    pub fn body_plan(&self, parts: &Parts) -> Plan {
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

    /// Scans and rewrites the request head in place. Returns what was swapped or kept, or
    /// the refusal for the first refused match.
    pub fn rewrite_head(&self, parts: &mut Parts) -> Result<Vec<Swapped>, Refusal> {
        let mut done = Vec::new();
        // A rule admitted a secret on the normalised path: that path is the one sent.
        if let Some(ruled) = self.ruled.as_ref().filter(|r| r.send_normalised) {
            let query = parts.uri.query().map(str::to_owned);
            set_target(parts, &ruled.path, query.as_deref())?;
        }
        // The method and path can carry no grant: any match there is refused or kept.
        self.check_only(parts.method.as_str().as_bytes(), &Place::Method, &mut done)?;
        self.check_only(parts.uri.path().as_bytes(), &Place::Path, &mut done)?;
        // The query: swapped values are percent-encoded.
        if let Some(query) = parts.uri.query()
            && self.guard.is_match(query.as_bytes())
        {
            // Copied out: the target is rebuilt below.
            let (path, query) = (parts.uri.path().to_owned(), query.to_owned());
            let plan = self.plan(&Place::Query).with_swap_form(SwapForm::Percent);
            let rewritten = self
                .guard
                .rewrite(query.as_bytes(), &plan)
                .map_err(|e| self.refusal(e, &Place::Query))?;
            if rewritten.is_changed() {
                let new_query = String::from_utf8_lossy(rewritten.bytes());
                set_target(parts, &path, Some(&new_query))?;
            }
            done.push(Swapped {
                place: Place::Query,
                tally: rewritten.tally().clone(),
            });
        }
        // Headers: names are only checked; values are swapped where the header is granted,
        // including inside `Basic` credentials.
        let mut replaced: Vec<(HeaderName, usize, HeaderValue)> = Vec::new();
        for name in parts.headers.keys() {
            self.check_only(name.as_str().as_bytes(), &Place::HeaderName, &mut done)?;
            self.check_name_case_folded(name)?;
            for (index, value) in parts.headers.get_all(name).iter().enumerate() {
                // `Basic` credentials hide a placeholder in base64: `basic` looks inside.
                if !basic::may_match(self.guard, value.as_bytes()) {
                    continue;
                }
                let place = Place::Header(name.clone());
                let rewritten =
                    basic::rewrite_header_value(self.guard, value.as_bytes(), &self.plan(&place))
                        .map_err(|e| self.refusal(e, &place))?;
                if rewritten.is_changed() {
                    let new = HeaderValue::from_bytes(rewritten.bytes()).map_err(|_| {
                        Refusal::bad_request(format!(
                            "the value swapped into header {name} is not a valid header value"
                        ))
                    })?;
                    replaced.push((name.clone(), index, new));
                }
                done.push(Swapped {
                    place,
                    tally: rewritten.tally().clone(),
                });
            }
        }
        for (name, index, value) in replaced {
            replace_nth(&mut parts.headers, &name, index, value);
        }
        Ok(done)
    }

    /// A place where nothing may be swapped: a refused match is a refusal, a kept one (a
    /// verbatim placeholder, a value toward its own host) is counted.
    fn check_only(
        &self,
        bytes: &[u8],
        place: &Place,
        done: &mut Vec<Swapped>,
    ) -> Result<(), Refusal> {
        if !self.guard.is_match(bytes) {
            return Ok(());
        }
        // Nothing here is rewritten, so a value that would be redacted elsewhere (toward a
        // verbatim host) is refused: passing it on unchanged would send it.
        let mut plan = self.plan(place);
        for id in self.guard.ids() {
            if plan.on_value(id) == OnValue::Redact {
                let on_placeholder = plan.on_placeholder(id);
                plan.set(id, on_placeholder, OnValue::Refuse);
            }
        }
        let rewritten = self
            .guard
            .rewrite(bytes, &plan)
            .map_err(|e| self.refusal(e, place))?;
        done.push(Swapped {
            place: place.clone(),
            tally: rewritten.tally().clone(),
        });
        Ok(())
    }

    /// A header name arrives lowercased, so a value or a placeholder spelled into it escapes
    /// the exact scan: both are matched again without regard to case. A value is refused
    /// where it may not go; every value the name holds is weighed, so one that may go to this
    /// host does not let another through beside it. A placeholder is refused wherever it is
    /// not kept (a name is no place it can be swapped into).
    fn check_name_case_folded(&self, name: &HeaderName) -> Result<(), Refusal> {
        let name = name.as_str().as_bytes();
        let values = self.guard.values_in_name(name);
        let placeholders = self.guard.placeholders_in_name(name);
        if values.is_empty() && placeholders.is_empty() {
            return Ok(());
        }
        let plan = self.plan(&Place::HeaderName);
        let refused_value = values
            .into_iter()
            .find(|&secret| plan.on_value(secret) != OnValue::Keep)
            .map(|secret| (secret, Form::Value(Encoding::Raw)));
        let refused_placeholder = || {
            placeholders
                .into_iter()
                .find(|&secret| plan.on_placeholder(secret) != OnPlaceholder::Keep)
                .map(|secret| (secret, Form::Placeholder))
        };
        let Some((secret, form)) = refused_value.or_else(refused_placeholder) else {
            return Ok(());
        };
        let refused = sluice_guard::RefusedMatch {
            secret,
            name: self.guard.name(secret).to_owned(),
            form,
            offset: 0,
        };
        Err(self.refusal(GuardError::Refused(refused), &Place::HeaderName))
    }

    /// The refusal sent back for a refused match: names the secret, the place, the host and
    /// the grant that would allow it. Never the value.
    pub fn refusal(&self, error: GuardError, place: &Place) -> Refusal {
        let GuardError::Refused(refused) = error else {
            return Refusal::bad_request(format!(
                "sluice could not scan the {}: {error}",
                place.label()
            ));
        };
        let (host, port) = (self.target.host.as_str(), self.target.port);
        let secret = refused.name.as_str();
        let target = self.target.authority();
        match refused.form {
            Form::Placeholder => {
                let mut code = Code::PlaceholderNotGranted;
                let why = match place.location() {
                    _ if self.plain => {
                        "placeholders are never swapped into plain http:// requests; use https://"
                            .to_owned()
                    }
                    Some(location) => match self.ungranted(secret, &location) {
                        Some(refusal) => {
                            if let Ungranted::RequestNotAllowed { .. } = refusal {
                                code = Code::RequestNotAllowed;
                            }
                            refusal.to_string()
                        }
                        None => "the grant was withdrawn".into(),
                    },
                    None => format!(
                        "placeholders are swapped only in headers, the query or the body, never in the {}",
                        place.label()
                    ),
                };
                Refusal::secret_refused(
                    code,
                    format!(
                        "sluice refused the request to {target}: placeholder of secret {secret} in {}: {why}",
                        place.label()
                    ),
                    secret,
                    place.label(),
                )
            }
            Form::Value(encoding) => {
                let why = match self.policy.may_reach(secret, host, port) {
                    _ if self.plain => "a secret value never leaves in plain http://".to_owned(),
                    Err(refusal) => refusal.to_string(),
                    Ok(_) => "the grant was withdrawn".into(),
                };
                Refusal::secret_refused(
                    Code::SecretValueRefused,
                    format!(
                        "sluice refused the request to {target}: the real value of secret {secret} ({} form) in {}: {why}",
                        encoding.family(),
                        place.label()
                    ),
                    secret,
                    place.label(),
                )
            }
        }
    }
}

impl Outbound<'_> {
    /// Why `secret` may not be swapped at `location` in this request, as the grant
    /// decision words it: the whole of [`Policy::may`] when the request rules were weighed.
    fn ungranted(&self, secret: &str, location: &Location) -> Option<Ungranted> {
        let (host, port) = (self.target.host.as_str(), self.target.port);
        let decided = match &self.ruled {
            Some(ruled) => {
                let line = RequestLine::new(&ruled.method, &ruled.path);
                self.policy
                    .may(secret, Sink::Egress, host, port, location, &line)
            }
            None => self
                .policy
                .may_place(secret, Sink::Egress, host, port, location),
        };
        decided.err()
    }
}

/// Replaces the path and query of `parts`' target, keeping its scheme and authority.
fn set_target(parts: &mut Parts, path: &str, query: Option<&str>) -> Result<(), Refusal> {
    let target = match query {
        Some(query) => format!("{path}?{query}"),
        None => path.to_owned(),
    };
    let invalid = || Refusal::bad_request("the rewritten request target is not valid");
    let pq: PathAndQuery = target.parse().map_err(|_| invalid())?;
    let mut uri = parts.uri.clone().into_parts();
    uri.path_and_query = Some(pq);
    parts.uri = http::Uri::from_parts(uri).map_err(|_| invalid())?;
    Ok(())
}

/// Refuses a target authority (a CONNECT target, an absolute-form URI's host) that holds
/// a placeholder or a known value: secrets never go in host names, where a lookup alone
/// would carry them to a resolver. Checked on the authority exactly as the client sent it,
/// before normalisation lowercases it.
pub(crate) fn check_authority(guard: &Guard, raw: &str) -> Result<(), Refusal> {
    let raw = raw.as_bytes();
    // Host names are compared without regard to case, and so are values in them: a lookup
    // of a case-folded value carries it to a resolver just the same.
    let found = guard
        .find_iter(raw)
        .next()
        .map(|hit| (hit.secret, hit.form))
        .or_else(|| {
            let value = guard.values_in_name(raw).first().copied();
            value.map(|secret| (secret, Form::Value(Encoding::Raw)))
        })
        .or_else(|| {
            let placeholder = guard.placeholders_in_name(raw).first().copied();
            placeholder.map(|secret| (secret, Form::Placeholder))
        });
    let Some((secret, form)) = found else {
        return Ok(());
    };
    let secret = guard.name(secret);
    let (code, what) = match form {
        Form::Placeholder => (Code::PlaceholderNotGranted, "a placeholder"),
        Form::Value(_) => (Code::SecretValueRefused, "the real value"),
    };
    Err(Refusal::secret_refused(
        code,
        format!(
            "sluice refused the request: the target host holds {what} of secret {secret}; secrets are never sent in host names"
        ),
        secret,
        "host".to_owned(),
    ))
}

/// Replaces the `index`th value of header `name`, keeping the order of the others.
fn replace_nth(headers: &mut http::HeaderMap, name: &HeaderName, index: usize, value: HeaderValue) {
    // Nearly always the header's one value: replaced where it stands.
    if index == 0 && headers.get_all(name).iter().nth(1).is_none() {
        headers.insert(name.clone(), value);
        return;
    }
    let mut values: Vec<HeaderValue> = headers.get_all(name).iter().cloned().collect();
    if let Some(slot) = values.get_mut(index) {
        *slot = value;
    }
    headers.remove(name);
    for v in values {
        headers.append(name.clone(), v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replace_nth_replaces_one_value_and_keeps_the_order_of_the_rest() {
        let name = HeaderName::from_static("x-token");
        let values = |headers: &http::HeaderMap| -> Vec<String> {
            headers
                .get_all(&name)
                .iter()
                .map(|v| v.to_str().unwrap().to_owned())
                .collect()
        };
        let mut one = http::HeaderMap::new();
        one.insert(&name, HeaderValue::from_static("a"));
        one.insert("x-other", HeaderValue::from_static("o"));
        replace_nth(&mut one, &name, 0, HeaderValue::from_static("A"));
        assert_eq!(values(&one), ["A"]);
        assert_eq!(one["x-other"], "o");
        for (index, expected) in [
            (0, ["A", "b", "c"]),
            (1, ["a", "B", "c"]),
            (2, ["a", "b", "C"]),
        ] {
            let mut three = http::HeaderMap::new();
            for v in ["a", "b", "c"] {
                three.append(&name, HeaderValue::from_static(v));
            }
            let upper = HeaderValue::from_str(expected[index]).unwrap();
            replace_nth(&mut three, &name, index, upper);
            assert_eq!(values(&three), expected);
        }
    }

    #[test]
    fn request_rules_decide_per_request_and_never_poison_the_tunnels_plans() {
        let yaml = r#"
version: 1
secrets:
  gh:
    value: "Gh-Value-000000001"
    hosts: ["api.test", "model.test"]
    allow: [{ methods: [GET], paths: ["/repos/**"] }]
egress:
  verbatim: ["model.test"]
"#;
        let policy = Policy::parse(yaml, "rules.yaml").unwrap().policy;
        let guard = policy.build_guard(&policy.mint_placeholders()).unwrap();
        let placeholder = guard
            .placeholder(guard.id("gh").unwrap())
            .as_str()
            .to_owned();
        let api = Target {
            host: "api.test".into(),
            port: 443,
        };
        // One cache per tunnel, as each tunnel has one target.
        let (api_tunnel, model_tunnel) = (PlanCache::default(), PlanCache::default());
        let send = |target: &Target, cache: &PlanCache, method: http::Method, path: &str| {
            let (mut parts, ()) = http::Request::builder()
                .method(method)
                .uri(format!("https://{}{path}", target.host))
                .header("authorization", format!("Bearer {placeholder}"))
                .body(())
                .unwrap()
                .into_parts();
            let outbound = Outbound::new(&guard, &policy, target)
                .with_cache(cache)
                .for_request(&parts.method, parts.uri.path());
            outbound.rewrite_head(&mut parts).map(|_| parts)
        };
        // One tunnel, three requests: admitted, refused, admitted again.
        let sent = send(&api, &api_tunnel, http::Method::GET, "/repos/a/../b").unwrap();
        assert_eq!(sent.headers["authorization"], "Bearer Gh-Value-000000001");
        assert_eq!(
            sent.uri.path(),
            "/repos/b",
            "the path the rule matched is sent"
        );
        let refused = send(&api, &api_tunnel, http::Method::DELETE, "/repos/b").unwrap_err();
        assert_eq!(refused.code, Code::RequestNotAllowed);
        assert!(
            refused.message.contains("add DELETE to its methods"),
            "{}",
            refused.message
        );
        let again = send(&api, &api_tunnel, http::Method::GET, "/repos/c").unwrap();
        assert_eq!(again.headers["authorization"], "Bearer Gh-Value-000000001");
        // Toward a verbatim host, a request the rules refuse keeps its placeholder.
        let model = Target {
            host: "model.test".into(),
            port: 443,
        };
        let kept = send(&model, &model_tunnel, http::Method::POST, "/v1/messages").unwrap();
        assert_eq!(
            kept.headers["authorization"],
            format!("Bearer {placeholder}").as_str()
        );
    }

    #[test]
    fn a_header_name_holding_two_values_is_refused_for_the_one_the_host_may_not_get() {
        let yaml = r#"
version: 1
secrets:
  mine:
    value: "Mine-Value-0001"
    hosts: ["api.test"]
  theirs:
    value: "Theirs-Value-0002"
    hosts: ["other.test"]
"#;
        let policy = Policy::parse(yaml, "two.yaml").unwrap().policy;
        let guard = policy.build_guard(&policy.mint_placeholders()).unwrap();
        let target = Target {
            host: "api.test".into(),
            port: 443,
        };
        let outbound = Outbound::new(&guard, &policy, &target);
        // What hyper hands over for `X-Mine-Value-0001-Theirs-Value-0002: 1`: `mine` may go
        // to api.test, `theirs` may not, and comes second.
        let (mut parts, ()) = http::Request::get("https://api.test/")
            .header("x-mine-value-0001-theirs-value-0002", "1")
            .body(())
            .unwrap()
            .into_parts();
        let refusal = outbound.rewrite_head(&mut parts).unwrap_err();
        assert_eq!(refusal.code, "secret-value-refused");
        assert_eq!(refusal.secret.as_deref(), Some("theirs"));
        assert!(
            !refusal
                .message
                .to_ascii_lowercase()
                .contains("theirs-value-0002"),
            "{}",
            refusal.message
        );
        // Alone, the value the host may get passes.
        let (mut parts, ()) = http::Request::get("https://api.test/")
            .header("x-mine-value-0001", "1")
            .body(())
            .unwrap()
            .into_parts();
        assert!(outbound.rewrite_head(&mut parts).is_ok());
    }

    #[test]
    fn a_value_toward_a_verbatim_host_becomes_its_placeholder_where_it_can_be_rewritten() {
        let yaml = r#"
version: 1
secrets:
  tok:
    value: "Tok-Value-0001"
    hosts: ["api.test"]
egress:
  verbatim: ["model.test"]
  allow: ["other.test"]
"#;
        let policy = Policy::parse(yaml, "verbatim.yaml").unwrap().policy;
        let guard = policy.build_guard(&policy.mint_placeholders()).unwrap();
        let placeholder = guard
            .placeholder(guard.id("tok").unwrap())
            .as_str()
            .to_owned();
        let target = |host: &str| Target {
            host: host.into(),
            port: 443,
        };
        let (model, other) = (target("model.test"), target("other.test"));
        let request = |uri: &str| {
            http::Request::get(uri)
                .header("x-quoted", "the user said Tok-Value-0001 earlier")
                .body(())
                .unwrap()
                .into_parts()
                .0
        };
        // Toward the model boundary: the header and the query carry the placeholder now.
        let mut parts = request("https://model.test/v1?q=Tok-Value-0001");
        let done = Outbound::new(&guard, &policy, &model)
            .rewrite_head(&mut parts)
            .unwrap();
        assert_eq!(
            parts.headers["x-quoted"],
            format!("the user said {placeholder} earlier").as_str()
        );
        assert_eq!(parts.uri.query(), Some(format!("q={placeholder}").as_str()));
        let redacted: u64 = done.iter().map(|d| d.tally.total().redacted).sum();
        assert_eq!(redacted, 2);
        // Where the request cannot be rewritten (the path), it is refused, never sent on.
        let mut parts = request("https://model.test/Tok-Value-0001");
        let refusal = Outbound::new(&guard, &policy, &model)
            .rewrite_head(&mut parts)
            .unwrap_err();
        assert_eq!(refusal.secret.as_deref(), Some("tok"));
        // Toward any other ungranted host the value is exfiltration: refused.
        let mut parts = request("https://other.test/v1");
        let refusal = Outbound::new(&guard, &policy, &other)
            .rewrite_head(&mut parts)
            .unwrap_err();
        assert_eq!(refusal.secret.as_deref(), Some("tok"));
        assert!(
            !refusal.message.contains("Tok-Value-0001"),
            "{}",
            refusal.message
        );
    }

    #[test]
    fn a_placeholder_in_a_header_name_is_refused_whatever_its_letter_case() {
        let yaml = r#"
version: 1
secrets:
  tok:
    value: "Tok-Value-0001"
    hosts: ["api.test", "model.test"]
egress:
  verbatim: ["model.test"]
"#;
        let policy = Policy::parse(yaml, "name.yaml").unwrap().policy;
        let placeholders = policy.mint_placeholders();
        let guard = policy.build_guard(&placeholders).unwrap();
        let tok = guard.id("tok").unwrap();
        let placeholder = guard.placeholder(tok).as_str().to_owned();
        let api = Target {
            host: "api.test".into(),
            port: 443,
        };
        // Toward a host the secret grants, `X-SLUICE_TOK_…: 1` arrives lowercased (hyper's
        // header names always are) and is refused: a name is no place to swap into.
        let lower = format!("x-{}", placeholder.to_ascii_lowercase());
        let (mut parts, ()) = http::Request::get("https://api.test/")
            .header(format!("X-{placeholder}").as_str(), "1")
            .body(())
            .unwrap()
            .into_parts();
        assert!(parts.headers.contains_key(lower.as_str()));
        let refusal = Outbound::new(&guard, &policy, &api)
            .rewrite_head(&mut parts)
            .unwrap_err();
        assert_eq!(refusal.code, "placeholder-not-granted");
        assert_eq!(refusal.secret.as_deref(), Some("tok"));
        assert_eq!(refusal.location.as_deref(), Some("header-name"));
        assert!(refusal.message.contains("tok"), "{}", refusal.message);
        // An egress.verbatim host keeps placeholders where they are, names included.
        let model = Target {
            host: "model.test".into(),
            port: 443,
        };
        let (mut parts, ()) = http::Request::get("https://model.test/")
            .header(lower.as_str(), "1")
            .body(())
            .unwrap()
            .into_parts();
        assert!(
            Outbound::new(&guard, &policy, &model)
                .rewrite_head(&mut parts)
                .is_ok()
        );
    }

    #[test]
    fn the_plan_cache_decides_once_and_stays_bounded() {
        let guard = Guard::builder().build().unwrap();
        let cache = PlanCache::default();
        let mut made = 0;
        for _ in 0..3 {
            cache.get_or_insert(&Place::Query, || {
                made += 1;
                Plan::refuse_all(&guard)
            });
        }
        assert_eq!(made, 1, "a cached place is decided once");
        for i in 0..(PlanCache::CAPACITY * 2) {
            let name = HeaderName::try_from(format!("x-{i}")).unwrap();
            cache.get_or_insert(&Place::Header(name), || Plan::refuse_all(&guard));
        }
        assert!(cache.plans.lock().unwrap().len() <= PlanCache::CAPACITY);
    }
}
