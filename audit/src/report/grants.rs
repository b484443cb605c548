//! Grants against use: what the runs' declarations granted (the `start` events' `grants`),
//! what `swap` events used, and what was refused for want of a grant, hosts matched as the
//! grant decision matches them. From it, the report's "grants never used" and the patch
//! `sluice audit suggest` prints.
//!
//! It reads names, hosts and places only, as the log holds them; never a value.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use serde::Serialize;

use super::Named;
use crate::{EventKind, Line};

/// What `sluice audit suggest` proposes, each with the count of events behind it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Suggestions {
    /// Hosts refused as not allowed (`host-not-allowed`, `dns-name-not-allowed`): to
    /// `egress.allow`, or to the hosts of the secret they were meant for.
    pub allow: Vec<Named>,
    /// A secret's placeholder refused toward a host none of its grants names: to its
    /// `hosts` (`name` the secret, `detail` the host).
    pub hosts: Vec<Named>,
    /// A secret's placeholder refused in a place its grant for that host lacks: to its
    /// `in` (`detail` the place).
    pub places: Vec<Named>,
    /// Grants no `swap` used: candidates to remove (`detail` is `HOST PLACE`).
    pub unused: Vec<Named>,
}

/// The tallies, filled line by line.
#[derive(Default)]
pub(super) struct Grants {
    /// `(secret, host pattern, place)` of every grant a `start` event declared.
    granted: BTreeSet<(String, String, String)>,
    /// `(secret, host, place)` of every `swap`.
    swapped: HashSet<(String, String, String)>,
    /// Hosts refused as not allowed, and how often.
    not_allowed: BTreeMap<String, u64>,
    /// `(secret, host, place)` of placeholders refused as not granted, and how often.
    ungranted: BTreeMap<(String, String, String), u64>,
}

impl Grants {
    /// Reads one line of a log.
    pub(super) fn line(&mut self, line: &Line) {
        let name = |field: &Option<String>| field.clone().unwrap_or_default();
        let place = || {
            let location = name(&line.location);
            location.split(':').next().unwrap_or_default().to_owned()
        };
        let count = line.count.unwrap_or(1).max(1);
        match line.event {
            EventKind::Start => {
                for (secret, grants) in line.grants.iter().flatten() {
                    for grant in grants {
                        if let Some((host, place)) = grant.split_once(' ') {
                            let key = (secret.clone(), host.to_owned(), place.to_owned());
                            self.granted.insert(key);
                        }
                    }
                }
            }
            EventKind::Swap => {
                let key = (name(&line.secret), name(&line.host), place());
                self.swapped.insert(key);
            }
            EventKind::Deny
                if matches!(
                    line.reason.as_deref(),
                    Some("host-not-allowed" | "dns-name-not-allowed")
                ) =>
            {
                let host = allow_entry(&name(&line.host));
                if !host.is_empty() {
                    *self.not_allowed.entry(host).or_default() += count;
                }
            }
            EventKind::Refuse if line.reason.as_deref() == Some("placeholder-not-granted") => {
                let key = (name(&line.secret), name(&line.host), place());
                if !key.0.is_empty() {
                    *self.ungranted.entry(key).or_default() += count;
                }
            }
            _ => {}
        }
    }

    /// The grants no `swap` used, by secret.
    pub(super) fn unused(&self) -> Vec<Named> {
        self.granted
            .iter()
            .filter(|(secret, pattern, place)| {
                !self
                    .swapped
                    .iter()
                    .any(|(s, host, p)| s == secret && p == place && host_matches(pattern, host))
            })
            .map(|(secret, pattern, place)| Named {
                name: secret.clone(),
                detail: format!("{pattern} {place}"),
                count: 0,
            })
            .collect()
    }

    /// What the refusals and the unused grants suggest.
    pub(super) fn suggestions(&self) -> Suggestions {
        let mut hosts: BTreeMap<(String, String), u64> = BTreeMap::new();
        let mut places: BTreeMap<(String, String), u64> = BTreeMap::new();
        for ((secret, host, place), count) in &self.ungranted {
            // A grant of this secret names the host: it was the place that was missing.
            let named = self
                .granted
                .iter()
                .any(|(s, pattern, _)| s == secret && host_matches(pattern, host));
            if named {
                *places.entry((secret.clone(), place.clone())).or_default() += count;
            } else {
                *hosts
                    .entry((secret.clone(), allow_entry(host)))
                    .or_default() += count;
            }
        }
        let rows = |map: BTreeMap<(String, String), u64>| -> Vec<Named> {
            map.into_iter()
                .map(|((name, detail), count)| Named {
                    name,
                    detail,
                    count,
                })
                .collect()
        };
        Suggestions {
            allow: self
                .not_allowed
                .iter()
                .map(|(host, count)| Named {
                    name: host.clone(),
                    detail: String::new(),
                    count: *count,
                })
                .collect(),
            hosts: rows(hosts),
            places: rows(places),
            unused: self.unused(),
        }
    }
}

/// A host as a declaration would list it: its port dropped when it is 443.
fn allow_entry(host: &str) -> String {
    host.strip_suffix(":443").unwrap_or(host).to_owned()
}

/// Whether an event's host (`name` or `name:port`) is one a grant's host pattern (`name`,
/// `*.suffix`, either with `:port`) names, as the grant decision reads patterns.
pub(super) fn host_matches(pattern: &str, host: &str) -> bool {
    let split = |text: &str| -> (String, Option<String>) {
        match text.rsplit_once(':') {
            Some((name, port))
                if port.bytes().all(|b| b.is_ascii_digit()) && !name.ends_with(':') =>
            {
                (
                    name.trim_matches(['[', ']']).to_ascii_lowercase(),
                    Some(port.to_owned()),
                )
            }
            _ => (text.trim_matches(['[', ']']).to_ascii_lowercase(), None),
        }
    };
    let ((pattern_name, pattern_port), (host_name, host_port)) = (split(pattern), split(host));
    let port_ok = match (&pattern_port, &host_port) {
        (Some(want), Some(got)) => want == got,
        (Some(want), None) => want == "443",
        (None, _) => true,
    };
    let name_ok = match pattern_name.strip_prefix("*.") {
        Some(suffix) => host_name
            .strip_suffix(suffix)
            .and_then(|head| head.strip_suffix('.'))
            .is_some_and(|head| !head.is_empty()),
        None => pattern_name == host_name,
    };
    port_ok && name_ok
}
