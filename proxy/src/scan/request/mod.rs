//! Outbound: the scan of a request toward an intercepted host.
//!
//! Every part of the request is scanned with the guard: method, path, query, header names
//! and values, body and trailers. What a match becomes is decided per secret, per place, by
//! `sluice-policies`, and written into a guard [`Plan`](sluice_guard::Plan):
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
//!
//! The scan's parts: [`place`] names where a match was found; [`plans`] turns the grant
//! decision into the guard's plan for each place (once per tunnel, the request rules once
//! per request); [`wording`] says why a match was refused; this file rewrites the head.

use http::header::{HeaderName, HeaderValue};
use http::request::Parts;
use http::uri::PathAndQuery;
use sluice_guard::{Encoding, Form, Guard, GuardError, OnPlaceholder, OnValue, SwapForm};
use sluice_policies::Policy;

use crate::refusal::Refusal;
use crate::scan::basic;
use crate::tls::target::Target;

mod place;
mod plans;
mod wording;

#[cfg(test)]
mod tests;

pub(crate) use place::Place;
pub(crate) use place::Swapped;
pub(crate) use plans::PlanCache;
use plans::Ruled;

/// The outbound scan for one target host: the guard and the grants.
pub(crate) struct Outbound<'a> {
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

impl<'a> Outbound<'a> {
    /// The scan of requests toward `target`.
    pub(crate) fn new(guard: &'a Guard, policy: &'a Policy, target: &'a Target) -> Self {
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
    pub(crate) fn with_cache(self, cache: &'a PlanCache) -> Self {
        Self {
            cache: Some(cache),
            ..self
        }
    }

    /// The scan of plain `http://` requests toward `target`: every placeholder and every
    /// value is refused (a verbatim host keeps its placeholders, which are not secrets).
    pub(crate) fn plain(guard: &'a Guard, policy: &'a Policy, target: &'a Target) -> Self {
        Self {
            plain: true,
            ..Self::new(guard, policy, target)
        }
    }

    /// Scans and rewrites the request head in place. Returns what was swapped or kept, or
    /// the refusal for the first refused match.
    pub(crate) fn rewrite_head(&self, parts: &mut Parts) -> Result<Vec<Swapped>, Refusal> {
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
