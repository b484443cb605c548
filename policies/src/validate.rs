//! From the raw declaration to the compiled one: every rule of the declaration checked,
//! every error and lint collected with its YAML path and line:column (never only the
//! first), and, when no error was found, the parts a [`crate::Policy`] is built from.
//!
//! Messages produced here name secrets, keys and hosts, never a secret value.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use ipnet::IpNet;
use serde_saphyr::Spanned;
use zeroize::Zeroizing;

use crate::error::{Diagnostic, Problem};
use crate::host::HostPattern;
use crate::lint::looks_like_secret;
use crate::model::{Literal, Place, SecretDecl, Sink, Source, placeholder_name};
use crate::raw::{RawDeclaration, RawSecret, SpannedList};

/// The smallest secret value the guard can redact safely.
pub const MIN_VALUE_LEN: usize = 8;
/// The smallest placeholder.
pub const MIN_PLACEHOLDER_LEN: usize = 16;

/// Cloud metadata addresses that an `allow_ips` entry should not open.
const METADATA: [(&str, IpAddr); 2] = [
    (
        "169.254.169.254",
        IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254)),
    ),
    (
        "fd00:ec2::254",
        IpAddr::V6(Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)),
    ),
];

/// A declaration that passed validation, ready to become a [`crate::Policy`].
pub(crate) struct Validated {
    pub(crate) secrets: Vec<SecretDecl>,
    pub(crate) allow: Vec<HostPattern>,
    pub(crate) verbatim: Vec<HostPattern>,
    pub(crate) passthrough: Vec<HostPattern>,
    pub(crate) allow_ips: Vec<IpNet>,
}

/// Collects diagnostics for one file.
struct Ctx<'a> {
    file: &'a str,
    out: Vec<Diagnostic>,
}

impl Ctx<'_> {
    fn at<T>(&mut self, node: &Spanned<T>, path: impl Into<String>, problem: Problem) {
        self.out.push(Diagnostic {
            file: self.file.to_owned(),
            line: node.referenced.line(),
            column: node.referenced.column(),
            path: path.into(),
            problem,
        });
    }

    fn at_start(&mut self, path: impl Into<String>, problem: Problem) {
        self.out.push(Diagnostic {
            file: self.file.to_owned(),
            line: 1,
            column: 1,
            path: path.into(),
            problem,
        });
    }

    /// Parses every entry of a host list, reporting each bad one.
    fn hosts(&mut self, list: Option<&SpannedList>, path: &str) -> Vec<(HostPattern, Pos)> {
        let mut out = Vec::new();
        for (i, entry) in list
            .map(|l| l.value.as_slice())
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            match HostPattern::parse(&entry.value) {
                Ok(p) => out.push((p, Pos::of(entry))),
                Err(e) => self.at(entry, format!("{path}[{i}]"), Problem::Host(e)),
            }
        }
        out
    }
}

/// A position kept after the raw node is gone.
#[derive(Clone, Copy)]
struct Pos {
    line: u64,
    column: u64,
}

impl Pos {
    fn of<T>(node: &Spanned<T>) -> Pos {
        Pos {
            line: node.referenced.line(),
            column: node.referenced.column(),
        }
    }
}

/// Checks `raw` against every rule. Returns the diagnostics (errors and warnings, in file
/// order) and, when none is an error, the validated parts.
pub(crate) fn validate(
    raw: RawDeclaration,
    file: &str,
    base_dir: Option<&Path>,
) -> (Option<Validated>, Vec<Diagnostic>) {
    let mut cx = Ctx {
        file,
        out: Vec::new(),
    };

    match &raw.version {
        None if raw.secrets.is_none() && raw.egress.is_none() => cx.at_start("", Problem::Empty),
        None => cx.at_start("version", Problem::MissingVersion),
        Some(v) if v.value != 1 => {
            cx.at(v, "version", Problem::UnsupportedVersion { found: v.value })
        }
        Some(_) => {}
    }

    // egress
    let egress = raw.egress.as_ref().map(|e| &e.value);
    let allow = cx.hosts(egress.and_then(|e| e.allow.as_ref()), "egress.allow");
    let verbatim = cx.hosts(egress.and_then(|e| e.verbatim.as_ref()), "egress.verbatim");
    let passthrough = cx.hosts(
        egress.and_then(|e| e.passthrough.as_ref()),
        "egress.passthrough",
    );
    let mut allow_ips = Vec::new();
    if let Some(list) = egress.and_then(|e| e.allow_ips.as_ref()) {
        for (i, entry) in list.value.iter().enumerate() {
            let path = format!("egress.allow_ips[{i}]");
            match parse_cidr(&entry.value) {
                Some(net) => {
                    for (text, ip) in METADATA {
                        if net.contains(&ip) {
                            cx.at(
                                entry,
                                path.clone(),
                                Problem::MetadataReachable {
                                    cidr: entry.value.clone(),
                                    metadata: text,
                                },
                            );
                        }
                    }
                    allow_ips.push(net);
                }
                None => cx.at(
                    entry,
                    path,
                    Problem::BadCidr {
                        found: entry.value.clone(),
                    },
                ),
            }
        }
    }
    for (v, vpos) in &verbatim {
        for (p, _) in &passthrough {
            if v.overlaps(p) {
                cx.out.push(Diagnostic {
                    file: file.to_owned(),
                    line: vpos.line,
                    column: vpos.column,
                    path: "egress.verbatim".into(),
                    problem: Problem::VerbatimPassthrough {
                        verbatim: v.to_string(),
                        passthrough: p.to_string(),
                    },
                });
            }
        }
    }
    let passthrough_patterns: Vec<HostPattern> =
        passthrough.iter().map(|(p, _)| p.clone()).collect();

    // secrets
    let mut secrets = Vec::new();
    let mut secret_hosts: Vec<Vec<(HostPattern, Pos)>> = Vec::new();
    if let Some(list) = &raw.secrets {
        for (name, secret) in list.value.0.iter() {
            let (decl, hosts) = secret_decl(&mut cx, name, secret, &passthrough_patterns, base_dir);
            secrets.push(decl);
            secret_hosts.push(hosts);
        }
    }

    placeholders(
        &mut cx,
        raw.secrets
            .as_ref()
            .map(|s| &s.value.0[..])
            .unwrap_or_default(),
    );
    broad_wildcards(&mut cx, &secrets, &secret_hosts, &allow, &verbatim);

    cx.out.sort_by_key(|d| (d.line, d.column));
    if cx.out.iter().any(Diagnostic::is_error) {
        return (None, cx.out);
    }
    let secrets = secrets
        .into_iter()
        .map(|s| s.expect("no error, so every secret compiled"))
        .collect();
    let strip = |v: Vec<(HostPattern, Pos)>| v.into_iter().map(|(p, _)| p).collect();
    let validated = Validated {
        secrets,
        allow: strip(allow),
        verbatim: strip(verbatim),
        passthrough: passthrough_patterns,
        allow_ips,
    };
    (Some(validated), cx.out)
}

/// Parses `a.b.c.d/len`, `v6/len`, or a bare address (a single-address network).
fn parse_cidr(text: &str) -> Option<IpNet> {
    let text = text.trim();
    if let Ok(net) = text.parse::<IpNet>() {
        return Some(net.trunc());
    }
    text.parse::<IpAddr>().ok().map(IpNet::from)
}

/// Validates one secret. Returns its compiled form (`None` when it has errors) and its
/// host patterns with positions, for the cross-secret lints.
fn secret_decl(
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

    if n.is_empty()
        || !n
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
    {
        cx.at(
            name,
            base.clone(),
            Problem::BadSecretName {
                secret: n.escape_debug().to_string(),
            },
        );
    }

    // sinks
    let sinks = match &s.sinks {
        None => {
            cx.at(name, base.clone(), Problem::NoSinks { secret: n.clone() });
            vec![Sink::Egress]
        }
        Some(list) => {
            let mut sinks = Vec::new();
            for (i, entry) in list.value.iter().enumerate() {
                match Sink::from_name(&entry.value) {
                    Some(sink) if !sinks.contains(&sink) => sinks.push(sink),
                    Some(_) => {}
                    None => cx.at(
                        entry,
                        format!("{base}.sinks[{i}]"),
                        Problem::UnknownSink {
                            found: entry.value.clone(),
                        },
                    ),
                }
            }
            sinks
        }
    };
    let egress = sinks.contains(&Sink::Egress);

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

    // hosts
    let hosts = cx.hosts(s.hosts.as_ref(), &format!("{base}.hosts"));
    if egress && s.hosts.as_ref().is_none_or(|h| h.value.is_empty()) {
        let node_line = s
            .hosts
            .as_ref()
            .map(Pos::of)
            .unwrap_or_else(|| Pos::of(name));
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
            let at = s
                .hosts
                .as_ref()
                .map(Pos::of)
                .unwrap_or_else(|| Pos::of(name));
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

    // placeholder (alphabet and length; sharing is checked across secrets)
    if let Some(ph) = &s.placeholder {
        if let Some(bad) = ph
            .value
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '_'))
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

    // source
    let source = source(
        cx,
        name,
        s,
        &base,
        egress && locations.contains(&Place::Header),
        base_dir,
    );

    let errors_after = cx.out.iter().filter(|d| d.is_error()).count();
    let decl = match source {
        Some(source) if errors_after == errors_before => Some(SecretDecl {
            name: n.clone(),
            hosts: hosts.iter().map(|(h, _)| h.clone()).collect(),
            sinks,
            sinks_explicit: s.sinks.is_some(),
            locations,
            header_names,
            placeholder: s.placeholder.as_ref().map(|p| p.value.clone()),
            source,
        }),
        _ => None,
    };
    (decl, hosts)
}

fn push_at(cx: &mut Ctx<'_>, pos: Pos, path: String, problem: Problem) {
    cx.out.push(Diagnostic {
        file: cx.file.to_owned(),
        line: pos.line,
        column: pos.column,
        path,
        problem,
    });
}

/// Checks and compiles a secret's source.
fn source(
    cx: &mut Ctx<'_>,
    name: &Spanned<String>,
    s: &RawSecret,
    base: &str,
    header_swap: bool,
    base_dir: Option<&Path>,
) -> Option<Source> {
    let n = &name.value;
    if let (Some(from), Some(value)) = (&s.from, &s.value) {
        let (first, second, at) = if from.referenced.line() <= value.referenced.line() {
            ("from", "value", Pos::of(value))
        } else {
            ("value", "from", Pos::of(from))
        };
        push_at(
            cx,
            at,
            base.to_owned(),
            Problem::TwoSources {
                secret: n.clone(),
                first,
                second,
            },
        );
        return None;
    }
    if let Some(from) = &s.from {
        return match (&from.value.env, &from.value.file) {
            (Some(_), Some(file)) => {
                cx.at(
                    file,
                    format!("{base}.from"),
                    Problem::TwoSources {
                        secret: n.clone(),
                        first: "env",
                        second: "file",
                    },
                );
                None
            }
            (None, None) => {
                cx.at(
                    from,
                    format!("{base}.from"),
                    Problem::NoSource { secret: n.clone() },
                );
                None
            }
            (Some(env), None) if env.value.trim().is_empty() => {
                cx.at(
                    env,
                    format!("{base}.from.env"),
                    Problem::EmptySource {
                        secret: n.clone(),
                        key: "env",
                        what: "variable name",
                    },
                );
                None
            }
            (Some(env), None) => Some(Source::Env(env.value.clone())),
            (None, Some(file)) if file.value.trim().is_empty() => {
                cx.at(
                    file,
                    format!("{base}.from.file"),
                    Problem::EmptySource {
                        secret: n.clone(),
                        key: "file",
                        what: "path",
                    },
                );
                None
            }
            (None, Some(file)) => {
                let path = PathBuf::from(&file.value);
                let path = match base_dir {
                    Some(dir) if path.is_relative() => dir.join(path),
                    _ => path,
                };
                Some(Source::File(path))
            }
        };
    }
    if let Some(value) = &s.value {
        let path = format!("{base}.value");
        let bytes = value.value.0.as_bytes();
        let mut ok = true;
        if bytes.len() < MIN_VALUE_LEN {
            cx.at(
                value,
                path.clone(),
                Problem::ValueTooShort {
                    secret: n.clone(),
                    len: bytes.len(),
                    min: MIN_VALUE_LEN,
                },
            );
            ok = false;
        }
        if header_swap && let Some(byte) = header_unfit_byte(bytes) {
            cx.at(
                value,
                path.clone(),
                Problem::ValueUnfitForHeader {
                    secret: n.clone(),
                    byte,
                },
            );
            ok = false;
        }
        let why = looks_like_secret(&value.value.0)
            .map(|w| format!(", and {w}"))
            .unwrap_or_default();
        cx.at(
            value,
            path,
            Problem::LiteralValue {
                secret: n.clone(),
                why,
            },
        );
        return ok.then(|| Source::Literal(Literal(Zeroizing::new(bytes.to_vec()))));
    }
    cx.at(
        name,
        base.to_owned(),
        Problem::NoSource { secret: n.clone() },
    );
    None
}

/// The first byte that cannot appear in a header value: `CR`, `LF` or `NUL`.
pub(crate) fn header_unfit_byte(bytes: &[u8]) -> Option<&'static str> {
    bytes.iter().find_map(|b| match b {
        b'\r' => Some("CR"),
        b'\n' => Some("LF"),
        0 => Some("NUL"),
        _ => None,
    })
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

/// Placeholders shared or nested across secrets (fixed, or minted from names that map to
/// the same `SLUICE_<NAME>_` prefix).
fn placeholders(cx: &mut Ctx<'_>, secrets: &[(Spanned<String>, Spanned<RawSecret>)]) {
    let mut fixed: Vec<(&str, &Spanned<String>)> = Vec::new();
    let mut minted: HashMap<String, &str> = HashMap::new();
    for (name, secret) in secrets {
        let n = name.value.as_str();
        match &secret.value.placeholder {
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
fn broad_wildcards(
    cx: &mut Ctx<'_>,
    secrets: &[Option<SecretDecl>],
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
        let Some(name) = secrets[i].as_ref().map(|s| s.name.clone()) else {
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

    #[test]
    fn cidrs_and_bare_addresses_parse() {
        assert_eq!(
            parse_cidr("127.0.0.1/32").unwrap().to_string(),
            "127.0.0.1/32"
        );
        assert_eq!(parse_cidr("127.0.0.1").unwrap().to_string(), "127.0.0.1/32");
        assert_eq!(parse_cidr("10.1.2.3/8").unwrap().to_string(), "10.0.0.0/8");
        assert_eq!(parse_cidr("::1").unwrap().to_string(), "::1/128");
        assert!(parse_cidr("10.0.0.0/33").is_none());
        assert!(parse_cidr("localhost").is_none());
    }
}
