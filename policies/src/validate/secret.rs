//! One secret's grant, checked: its name, `sinks`, `in`, `header` names, `hosts` (against
//! the passthrough list) and `placeholder`; then the lints across secrets (placeholders
//! shared or nested, wildcards broader than the declaration shows they need).
//!
//! It owns what a secret may reach; where its value comes from is `source.rs`. It must
//! never read the environment or a file, nor put a secret value into a diagnostic.

use std::collections::HashMap;
use std::path::Path;

use serde_saphyr::Spanned;
use sluice_guard::MIN_PLACEHOLDER_LEN;

use super::{Ctx, Pos, approve, budget, pin, push_at, rules, source};
use crate::error::Problem;
use crate::host::HostPattern;
use crate::launcher_env::reserved;
use crate::model::{Place, PlaceholderForm, SecretDecl, Sink, placeholder_name};

/// A sample of GitHub's installation-token format (`ghs_` and 36 characters): a GitHub
/// App's placeholder is minted in its shape.
const GITHUB_INSTALLATION_TOKEN: &str = "ghs_000000000000000000000000000000000000";
use crate::raw::RawSecret;

/// Validates one secret. Returns its compiled form (`None` when it has errors) and its
/// host patterns with positions, for the cross-secret lints.
pub(super) fn secret_decl(
    cx: &mut Ctx<'_>,
    name: &Spanned<String>,
    secret: &Spanned<RawSecret>,
    passthrough: &[HostPattern],
    base_dir: Option<&Path>,
) -> (Option<SecretDecl>, Vec<(HostPattern, Pos)>) {
    let n = &name.value;
    let base = format!("secrets.{n}");
    let errors_before = cx.out.iter().filter(|d| d.is_error()).count();
    let s = &secret.value;

    check_name(cx, name, &base);
    for (key, list) in [("services", &s.services), ("regions", &s.regions)] {
        if let Some(list) = list {
            cx.at(
                list,
                format!("{base}.{key}"),
                Problem::OnlyForSigning {
                    secret: n.clone(),
                    key: key.to_owned(),
                },
            );
        }
    }

    // sinks. One mistake, one diagnostic: `sinks:` written empty is already an error (the
    // empty-keys pass), so it is not also "no sinks"; an unknown sink leaves the sinks
    // unknown, so the keys that need egress are not also reported.
    let mut sinks_unknown = false;
    let sinks = match &s.sinks {
        None => {
            let path = format!("{base}.sinks");
            let written_empty = cx
                .out
                .iter()
                .any(|d| d.path == path && matches!(d.problem, Problem::NoValue { .. }));
            if written_empty {
                sinks_unknown = true;
            } else {
                cx.at(name, base.clone(), Problem::NoSinks { secret: n.clone() });
            }
            vec![Sink::Egress]
        }
        Some(list) => {
            let mut sinks = Vec::new();
            for (i, entry) in list.value.iter().enumerate() {
                match Sink::from_name(&entry.value) {
                    Some(sink) if !sinks.contains(&sink) => sinks.push(sink),
                    Some(_) => {}
                    None => {
                        sinks_unknown = true;
                        cx.at(
                            entry,
                            format!("{base}.sinks[{i}]"),
                            Problem::UnknownSink {
                                found: entry.value.clone(),
                            },
                        );
                    }
                }
            }
            if !sinks.is_empty() && !sinks.iter().any(|sink| Sink::LAUNCHER.contains(sink)) {
                cx.at(
                    list,
                    format!("{base}.sinks"),
                    Problem::HostEngineOnly {
                        secret: n.clone(),
                        sinks: sinks
                            .iter()
                            .map(|sink| sink.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    },
                );
            }
            sinks
        }
    };
    let egress = sinks.contains(&Sink::Egress);
    // A minted secret with other sinks gets one diagnostic for it (`mint.rs`), not one per
    // key that sinks make meaningless.
    let minted = s.oauth2.is_some() || s.github_app.is_some();
    let minted_elsewhere = minted && !sinks.is_empty();
    if !egress && !minted_elsewhere && !sinks_unknown {
        let keys = [
            ("hosts", s.hosts.as_ref()),
            ("in", s.locations.as_ref()),
            ("header", s.header.as_ref()),
        ];
        for (key, list) in keys {
            if let Some(list) = list {
                cx.at(
                    list,
                    format!("{base}.{key}"),
                    Problem::NeedsEgress {
                        secret: n.clone(),
                        key,
                    },
                );
            }
        }
        let narrowing = [
            ("allow", s.allow.as_ref().map(Pos::of)),
            ("budget", s.budget.as_ref().map(Pos::of)),
            ("approve", s.approve.as_ref().map(Pos::of)),
            ("pin", s.pin.as_ref().map(Pos::of)),
        ];
        for (key, at) in narrowing {
            if let Some(at) = at {
                push_at(
                    cx,
                    at,
                    format!("{base}.{key}"),
                    Problem::NeedsEgress {
                        secret: n.clone(),
                        key,
                    },
                );
            }
        }
    }
    let variable = placeholder_name(n);
    if let Some(why) = reserved(&variable) {
        cx.at(
            name,
            base.clone(),
            Problem::ReservedVariable {
                secret: n.clone(),
                variable,
                why: why.to_string(),
            },
        );
    }

    // in
    let locations = match &s.locations {
        None => vec![Place::Header],
        Some(list) => {
            let mut places = Vec::new();
            for (i, entry) in list.value.iter().enumerate() {
                match Place::from_name(&entry.value) {
                    Some(p) if !places.contains(&p) => places.push(p),
                    Some(_) => {}
                    None => cx.at(
                        entry,
                        format!("{base}.in[{i}]"),
                        Problem::UnknownLocation {
                            found: entry.value.clone(),
                        },
                    ),
                }
            }
            if egress && list.value.is_empty() {
                cx.at(
                    list,
                    format!("{base}.in"),
                    Problem::NoLocations { secret: n.clone() },
                );
            }
            places
        }
    };

    // header
    let header_names = s.header.as_ref().map(|list| {
        if !locations.contains(&Place::Header) && s.locations.is_some() {
            cx.at(
                list,
                format!("{base}.header"),
                Problem::HeaderNamesWithoutHeader { secret: n.clone() },
            );
        }
        let mut names = Vec::new();
        for (i, entry) in list.value.iter().enumerate() {
            if is_header_token(&entry.value) {
                names.push(entry.value.to_ascii_lowercase());
            } else {
                cx.at(
                    entry,
                    format!("{base}.header[{i}]"),
                    Problem::BadHeaderName {
                        secret: n.clone(),
                        found: entry.value.escape_debug().to_string(),
                    },
                );
            }
        }
        names
    });

    // allow (request rules) and budget
    let rules = rules::request_rules(cx, n, s.allow.as_ref(), &base);
    let budget = s
        .budget
        .as_ref()
        .and_then(|raw| budget::budget(cx, raw, &base));
    let approve = s
        .approve
        .as_ref()
        .and_then(|raw| approve::approve(cx, raw, &base));
    let pins = pin::pins(cx, s.pin.as_ref(), &base);

    // hosts
    let hosts = granted_hosts(cx, name, s.hosts.as_ref(), &base, egress, passthrough);

    // placeholder (a form, or a literal's alphabet and length; sharing is checked across
    // secrets)
    if let Some(ph) = s.placeholder.as_ref().filter(|p| !is_form(&p.value)) {
        if let Some(bad) = ph
            .value
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
        {
            cx.at(
                ph,
                format!("{base}.placeholder"),
                Problem::PlaceholderAlphabet {
                    secret: n.clone(),
                    found: bad,
                },
            );
        } else if ph.value.len() < MIN_PLACEHOLDER_LEN {
            cx.at(
                ph,
                format!("{base}.placeholder"),
                Problem::PlaceholderTooShort {
                    secret: n.clone(),
                    len: ph.value.len(),
                    min: MIN_PLACEHOLDER_LEN,
                },
            );
        }
    }

    // source: a minted secret has none (its parts' sources are under `oauth2:`)
    let source = if minted {
        super::mint::minted_source(cx, name, s, &sinks, &base)
    } else {
        source::compile(
            cx,
            name,
            s,
            &base,
            egress && locations.contains(&Place::Header),
            base_dir,
        )
    };

    let errors_after = cx.out.iter().filter(|d| d.is_error()).count();
    let decl = match source {
        Some(source) if errors_after == errors_before => Some(SecretDecl {
            name: n.clone(),
            hosts: hosts.iter().map(|(h, _)| h.clone()).collect(),
            sinks,
            sinks_explicit: s.sinks.is_some(),
            locations,
            header_names,
            placeholder: match s.placeholder.as_ref().map(|p| p.value.as_str()) {
                // An installation token's shape, so that clients checking it accept it.
                None if s.github_app.is_some() => PlaceholderForm::Like(GITHUB_INSTALLATION_TOKEN),
                None => PlaceholderForm::Default,
                Some(SHAPED) => PlaceholderForm::Shaped,
                Some(PLAIN) => PlaceholderForm::Plain,
                Some(fixed) => PlaceholderForm::Fixed(fixed.to_owned()),
            },
            rules,
            budget,
            approve,
            pins,
            source,
            signs: None,
            mints: None,
        }),
        _ => None,
    };
    (decl, hosts)
}

/// A secret's name: letters, digits, `_`, `-` or `.`.
pub(super) fn check_name(cx: &mut Ctx<'_>, name: &Spanned<String>, base: &str) {
    let n = &name.value;
    if n.is_empty()
        || !n
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
    {
        cx.at(
            name,
            base.to_owned(),
            Problem::BadSecretName {
                secret: n.escape_debug().to_string(),
            },
        );
    }
}

/// A secret's `hosts:`, parsed; for a secret granted egress, required and not all
/// passthrough (each passthrough one is linted).
pub(super) fn granted_hosts(
    cx: &mut Ctx<'_>,
    name: &Spanned<String>,
    list: Option<&crate::raw::SpannedList>,
    base: &str,
    egress: bool,
    passthrough: &[HostPattern],
) -> Vec<(HostPattern, Pos)> {
    let n = &name.value;
    let hosts = cx.hosts(list, &format!("{base}.hosts"));
    if egress && list.is_none_or(|h| h.value.is_empty()) {
        let node_line = list.map(Pos::of).unwrap_or_else(|| Pos::of(name));
        push_at(
            cx,
            node_line,
            format!("{base}.hosts"),
            Problem::EgressWithoutHosts { secret: n.clone() },
        );
    }
    if egress && !hosts.is_empty() {
        let covered: Vec<bool> = hosts
            .iter()
            .map(|(h, _)| passthrough.iter().any(|p| covers(p, h)))
            .collect();
        if covered.iter().all(|&c| c) {
            let at = list.map(Pos::of).unwrap_or_else(|| Pos::of(name));
            push_at(
                cx,
                at,
                format!("{base}.hosts"),
                Problem::Unservable { secret: n.clone() },
            );
        } else {
            for (i, (h, pos)) in hosts.iter().enumerate() {
                if passthrough.iter().any(|p| p.overlaps(h)) {
                    push_at(
                        cx,
                        *pos,
                        format!("{base}.hosts[{i}]"),
                        Problem::PassthroughHost {
                            secret: n.clone(),
                            host: h.to_string(),
                        },
                    );
                }
            }
        }
    }
    hosts
}

/// Whether `name` is an HTTP header name (RFC 9110 token).
fn is_header_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Whether every host and port `inner` matches is matched by `outer`.
fn covers(outer: &HostPattern, inner: &HostPattern) -> bool {
    let port_ok = match (outer.port(), inner.port()) {
        (None, _) => true,
        (Some(a), Some(b)) => a == b,
        (Some(_), None) => false,
    };
    if !port_ok {
        return false;
    }
    let (o, i) = (outer.name(), inner.name());
    match (outer.is_wildcard(), inner.is_wildcard()) {
        (false, false) => o == i,
        (false, true) => false,
        (true, _) => {
            (inner.is_wildcard() && i == o)
                || i.strip_suffix(o)
                    .and_then(|h| h.strip_suffix('.'))
                    .is_some_and(|h| !h.is_empty())
        }
    }
}

/// `placeholder: shaped`: the value's own shape.
const SHAPED: &str = "shaped";
/// `placeholder: plain`: the `SLUICE_<NAME>_<nonce>` form.
const PLAIN: &str = "plain";

/// Whether a `placeholder:` names a form rather than a literal placeholder (a literal is at
/// least 16 characters, so neither word can be one).
fn is_form(placeholder: &str) -> bool {
    placeholder == SHAPED || placeholder == PLAIN
}

/// Placeholders shared or nested across secrets (fixed, or minted from names that map to
/// the same `SLUICE_<NAME>_` prefix).
pub(super) fn placeholders(cx: &mut Ctx<'_>, secrets: &[(Spanned<String>, Spanned<RawSecret>)]) {
    let mut fixed: Vec<(&str, &Spanned<String>)> = Vec::new();
    let mut minted: HashMap<String, &str> = HashMap::new();
    for (name, secret) in secrets {
        let n = name.value.as_str();
        match secret
            .value
            .placeholder
            .as_ref()
            .filter(|p| !is_form(&p.value))
        {
            Some(ph) => {
                let path = format!("secrets.{n}.placeholder");
                if let Some((other, _)) = fixed.iter().find(|(_, p)| p.value == ph.value) {
                    cx.at(
                        ph,
                        path,
                        Problem::SharedPlaceholder {
                            secret: n.to_owned(),
                            other: (*other).to_owned(),
                            placeholder: ph.value.clone(),
                        },
                    );
                } else if let Some((other, _)) = fixed.iter().find(|(_, p)| {
                    ph.value.contains(p.value.as_str()) || p.value.contains(ph.value.as_str())
                }) {
                    cx.at(
                        ph,
                        path,
                        Problem::PlaceholderContains {
                            secret: n.to_owned(),
                            other: (*other).to_owned(),
                        },
                    );
                }
                fixed.push((n, ph));
            }
            None => {
                let prefix = format!("SLUICE_{}_", placeholder_name(n));
                if let Some(other) = minted.get(&prefix) {
                    cx.at(
                        name,
                        format!("secrets.{n}"),
                        Problem::SharedPlaceholder {
                            secret: n.to_owned(),
                            other: (*other).to_owned(),
                            placeholder: format!("{prefix}<nonce>"),
                        },
                    );
                } else {
                    minted.insert(prefix, n);
                }
            }
        }
    }
}

/// Lints a secret's `*.suffix` host when the declaration names only a few exact hosts
/// under that suffix: the grant is broader than its siblings show it needs.
pub(super) fn broad_wildcards(
    cx: &mut Ctx<'_>,
    names: &[Option<String>],
    secret_hosts: &[Vec<(HostPattern, Pos)>],
    allow: &[(HostPattern, Pos)],
    verbatim: &[(HostPattern, Pos)],
) {
    let exact: Vec<&HostPattern> = secret_hosts
        .iter()
        .flatten()
        .chain(allow)
        .chain(verbatim)
        .map(|(p, _)| p)
        .filter(|p| !p.is_wildcard())
        .collect();
    for (i, hosts) in secret_hosts.iter().enumerate() {
        let Some(name) = names[i].clone() else {
            continue;
        };
        for (j, (pattern, pos)) in hosts.iter().enumerate() {
            if !pattern.is_wildcard() {
                continue;
            }
            let mut named: Vec<String> = exact
                .iter()
                .filter(|e| pattern.overlaps(e))
                .map(|e| e.name().to_owned())
                .collect();
            named.sort();
            named.dedup();
            if !named.is_empty() {
                push_at(
                    cx,
                    *pos,
                    format!("secrets.{name}.hosts[{j}]"),
                    Problem::BroadWildcard {
                        secret: name.clone(),
                        pattern: pattern.to_string(),
                        suffix: pattern.name().to_owned(),
                        named: named.join(", "),
                    },
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covers_is_containment() {
        let p = |s| HostPattern::parse(s).unwrap();
        assert!(covers(&p("*.example.com"), &p("a.example.com")));
        assert!(covers(&p("*.example.com"), &p("*.a.example.com")));
        assert!(covers(&p("*.example.com"), &p("*.example.com:443")));
        assert!(!covers(&p("*.example.com:443"), &p("*.example.com")));
        assert!(!covers(&p("a.example.com"), &p("*.example.com")));
        assert!(!covers(&p("*.example.com"), &p("example.com")));
    }
}
