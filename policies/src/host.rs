//! Host names and host patterns: one normal form (lowercase, no trailing dot, IDNA
//! punycode, canonical IP text) and the matching of `name`, `*.suffix` and `:port`.
//!
//! This module never resolves a name: it compares text only.

use std::fmt;
use std::net::{IpAddr, Ipv6Addr};

use crate::error::HostError;

/// Public suffixes under which a wildcard is refused as too broad.
///
/// This is a small built-in list (the generic and most common country-code second-level
/// suffixes, and multi-tenant hosting domains where anyone can own a subdomain), not the
/// whole Public Suffix List; any single-label suffix (`*.com`, `*.internal`) is refused too.
const PUBLIC_SUFFIXES: &[&str] = &[
    // country-code second levels
    "co.uk",
    "org.uk",
    "ac.uk",
    "gov.uk",
    "me.uk",
    "ltd.uk",
    "plc.uk",
    "net.uk",
    "com.au",
    "net.au",
    "org.au",
    "edu.au",
    "gov.au",
    "co.jp",
    "ne.jp",
    "or.jp",
    "ac.jp",
    "go.jp",
    "com.br",
    "net.br",
    "org.br",
    "gov.br",
    "com.cn",
    "net.cn",
    "org.cn",
    "gov.cn",
    "co.in",
    "net.in",
    "org.in",
    "gov.in",
    "co.nz",
    "net.nz",
    "org.nz",
    "co.za",
    "org.za",
    "co.kr",
    "or.kr",
    "com.mx",
    "com.ar",
    "com.tr",
    "com.tw",
    "com.hk",
    "com.sg",
    "com.my",
    "co.il",
    "co.id",
    "com.ua",
    "com.pl",
    "com.es",
    // multi-tenant hosting: every subdomain can belong to someone else
    "github.io",
    "gitlab.io",
    "herokuapp.com",
    "appspot.com",
    "vercel.app",
    "netlify.app",
    "pages.dev",
    "workers.dev",
    "blogspot.com",
    "azurewebsites.net",
    "cloudfront.net",
    "s3.amazonaws.com",
    "firebaseapp.com",
    "web.app",
    "fly.dev",
    "onrender.com",
    "ngrok.io",
    "ngrok-free.app",
    "trycloudflare.com",
    "repl.co",
];

/// Whether `suffix` (normalised) is a public suffix: a single label, or one of the
/// built-in list.
pub(crate) fn is_public_suffix(suffix: &str) -> bool {
    !suffix.contains('.') || PUBLIC_SUFFIXES.contains(&suffix)
}

/// Normalises a host name: lowercase, one trailing dot removed, internationalised labels
/// turned into punycode (IDNA), IP addresses in their canonical text (IPv6 without
/// brackets). `API.GitHub.com.` and `api.github.com` give the same result.
///
/// # Errors
///
/// [`HostError::Empty`] for an empty name, [`HostError::InvalidName`] for anything that
/// is not a DNS name or an IP address.
pub fn normalize_host(host: &str) -> Result<String, HostError> {
    let trimmed = host.strip_suffix('.').unwrap_or(host);
    if trimmed.is_empty() {
        return Err(HostError::Empty);
    }
    let unbracketed = trimmed
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(trimmed);
    if let Ok(ip) = unbracketed.parse::<IpAddr>() {
        return Ok(ip.to_string());
    }
    if unbracketed.contains(':') {
        return Err(invalid(host, "a `:` outside an IPv6 address"));
    }
    let ascii =
        idna::domain_to_ascii(trimmed).map_err(|_| invalid(host, "IDNA normalisation failed"))?;
    if ascii.len() > 253 {
        return Err(invalid(host, "longer than 253 characters"));
    }
    for label in ascii.split('.') {
        if label.is_empty() {
            return Err(invalid(host, "an empty label (two dots in a row)"));
        }
        if label.len() > 63 {
            return Err(invalid(host, "a label longer than 63 characters"));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(invalid(host, "a label that starts or ends with `-`"));
        }
        if label == "*" || label.contains('*') {
            return Err(invalid(host, "a `*` where a name was expected"));
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            return Err(invalid(
                host,
                "a character outside letters, digits, `-` and `_`",
            ));
        }
    }
    Ok(ascii)
}

fn invalid(host: &str, reason: &'static str) -> HostError {
    HostError::InvalidName {
        host: host.to_owned(),
        reason,
    }
}

/// Which names a pattern matches.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Name {
    /// Exactly this (normalised) name or IP.
    Exact(String),
    /// Any name with one or more labels before this suffix; never the suffix itself.
    Wildcard(String),
}

/// A host pattern from a declaration: an exact name (or IP), or `*.suffix` matching one or
/// more labels under the suffix but not the suffix itself, optionally with `:port`
/// (without one, every port matches).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPattern {
    name: Name,
    port: Option<u16>,
}

impl HostPattern {
    /// Parses and normalises a pattern such as `api.github.com`, `*.example.com:8443`,
    /// `127.0.0.1:8080` or `[::1]:443`.
    ///
    /// # Errors
    ///
    /// Any [`HostError`]: a malformed name or port, a misplaced `*`, or a wildcard over a
    /// public suffix ([`HostError::TooBroad`]).
    pub fn parse(pattern: &str) -> Result<HostPattern, HostError> {
        let (host, port) = split_port(pattern)?;
        if host.is_empty() {
            return Err(HostError::Empty);
        }
        if host == "*" || host == "*." {
            return Err(HostError::TooBroad {
                pattern: pattern.to_owned(),
                suffix: "*".into(),
            });
        }
        let name = if let Some(suffix) = host.strip_prefix("*.") {
            if suffix.contains('*') {
                return Err(HostError::BadWildcard {
                    pattern: pattern.to_owned(),
                });
            }
            let suffix = normalize_host(suffix)?;
            if suffix.parse::<IpAddr>().is_ok() {
                return Err(HostError::BadWildcard {
                    pattern: pattern.to_owned(),
                });
            }
            if is_public_suffix(&suffix) {
                return Err(HostError::TooBroad {
                    pattern: pattern.to_owned(),
                    suffix,
                });
            }
            Name::Wildcard(suffix)
        } else if host.contains('*') {
            return Err(HostError::BadWildcard {
                pattern: pattern.to_owned(),
            });
        } else {
            Name::Exact(normalize_host(host)?)
        };
        Ok(HostPattern { name, port })
    }

    /// Whether `host` (normalised here) on `port` matches. A host that cannot be
    /// normalised matches nothing.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        match normalize_host(host) {
            Ok(host) => self.matches_normalized(&host, port),
            Err(_) => false,
        }
    }

    /// Like [`HostPattern::matches`] for a host already normalised.
    pub(crate) fn matches_normalized(&self, host: &str, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        self.matches_name_normalized(host)
    }

    /// Whether the name part matches `host` (normalised), on whatever port the pattern
    /// names: a name lookup carries no port.
    pub(crate) fn matches_name_normalized(&self, host: &str) -> bool {
        match &self.name {
            Name::Exact(name) => name == host,
            Name::Wildcard(suffix) => host
                .strip_suffix(suffix.as_str())
                .and_then(|head| head.strip_suffix('.'))
                .is_some_and(|head| !head.is_empty()),
        }
    }

    /// Whether some host and port match both patterns.
    pub fn overlaps(&self, other: &HostPattern) -> bool {
        if let (Some(a), Some(b)) = (self.port, other.port)
            && a != b
        {
            return false;
        }
        match (&self.name, &other.name) {
            (Name::Exact(a), Name::Exact(b)) => a == b,
            (Name::Exact(e), Name::Wildcard(s)) | (Name::Wildcard(s), Name::Exact(e)) => {
                under(e, s)
            }
            (Name::Wildcard(a), Name::Wildcard(b)) => a == b || under(a, b) || under(b, a),
        }
    }

    /// Whether this is a `*.suffix` pattern.
    pub fn is_wildcard(&self) -> bool {
        matches!(self.name, Name::Wildcard(_))
    }

    /// The normalised name (for a wildcard, the suffix after `*.`).
    pub fn name(&self) -> &str {
        match &self.name {
            Name::Exact(n) | Name::Wildcard(n) => n,
        }
    }

    /// The port, when the pattern names one.
    pub fn port(&self) -> Option<u16> {
        self.port
    }
}

/// Whether `host` is strictly under `suffix`.
fn under(host: &str, suffix: &str) -> bool {
    host.strip_suffix(suffix)
        .and_then(|h| h.strip_suffix('.'))
        .is_some_and(|h| !h.is_empty())
}

/// Splits `host[:port]` / `[v6]:port` / bare IPv6 into host text and port.
fn split_port(pattern: &str) -> Result<(&str, Option<u16>), HostError> {
    if let Some(rest) = pattern.strip_prefix('[') {
        let Some(end) = rest.find(']') else {
            return Err(invalid(pattern, "a `[` without its `]`"));
        };
        let host = &pattern[..end + 2];
        let after = &rest[end + 1..];
        return match after.strip_prefix(':') {
            None if after.is_empty() => Ok((host, None)),
            None => Err(invalid(pattern, "text after `]` that is not `:port`")),
            Some(port) => Ok((host, Some(parse_port(pattern, port)?))),
        };
    }
    if pattern.parse::<Ipv6Addr>().is_ok() {
        return Ok((pattern, None));
    }
    match pattern.rsplit_once(':') {
        None => Ok((pattern, None)),
        Some((host, port)) => Ok((host, Some(parse_port(pattern, port)?))),
    }
}

fn parse_port(pattern: &str, port: &str) -> Result<u16, HostError> {
    match port.parse::<u16>() {
        Ok(p) if p != 0 && port.bytes().all(|b| b.is_ascii_digit()) => Ok(p),
        _ => Err(HostError::BadPort {
            pattern: pattern.to_owned(),
            port: port.to_owned(),
        }),
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bracket = |n: &str| n.contains(':');
        match &self.name {
            Name::Exact(n) if bracket(n) && self.port.is_some() => write!(f, "[{n}]")?,
            Name::Exact(n) => f.write_str(n)?,
            Name::Wildcard(s) => write!(f, "*.{s}")?,
        }
        if let Some(p) = self.port {
            write!(f, ":{p}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for HostPattern {
    type Err = HostError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        HostPattern::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation_folds_case_trailing_dot_and_idna() {
        assert_eq!(normalize_host("API.GitHub.com.").unwrap(), "api.github.com");
        assert_eq!(normalize_host("api.github.com").unwrap(), "api.github.com");
        assert_eq!(
            normalize_host("Bücher.Example").unwrap(),
            "xn--bcher-kva.example"
        );
        assert_eq!(
            normalize_host("xn--bcher-kva.example").unwrap(),
            "xn--bcher-kva.example"
        );
        assert_eq!(normalize_host("[::1]").unwrap(), "::1");
        assert_eq!(normalize_host("0:0::1").unwrap(), "::1");
        assert_eq!(normalize_host("127.0.0.1").unwrap(), "127.0.0.1");
    }

    #[test]
    fn normalisation_refuses_bad_names() {
        for bad in [
            "",
            ".",
            "a..b",
            "-a.com",
            "a b.com",
            "ex%41.com",
            "*.x.com",
            "a:b",
        ] {
            assert!(normalize_host(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn exact_pattern_matches_its_host_on_every_port() {
        let p = HostPattern::parse("API.GitHub.com.").unwrap();
        assert!(p.matches("api.github.com", 443));
        assert!(p.matches("Api.GitHub.Com.", 8443));
        assert!(!p.matches("evil.com", 443));
        assert!(!p.matches("x.api.github.com", 443));
        assert!(!p.matches("github.com", 443));
    }

    #[test]
    fn pattern_with_port_matches_only_that_port() {
        let p = HostPattern::parse("api.github.com:443").unwrap();
        assert!(p.matches("api.github.com", 443));
        assert!(!p.matches("api.github.com", 80));
        let v6 = HostPattern::parse("[::1]:8443").unwrap();
        assert!(v6.matches("[::1]", 8443));
        assert!(v6.matches("::1", 8443));
        assert!(!v6.matches("::1", 443));
        assert_eq!(v6.to_string(), "[::1]:8443");
    }

    #[test]
    fn wildcard_matches_one_or_more_labels_but_not_the_apex() {
        let p = HostPattern::parse("*.githubusercontent.com").unwrap();
        assert!(p.matches("raw.githubusercontent.com", 443));
        assert!(p.matches("a.b.githubusercontent.com", 443));
        assert!(!p.matches("githubusercontent.com", 443));
        assert!(!p.matches("evilgithubusercontent.com", 443));
        assert!(!p.matches("githubusercontent.com.evil.com", 443));
    }

    #[test]
    fn idna_pattern_matches_unicode_host() {
        let p = HostPattern::parse("*.bücher.example").unwrap();
        assert!(p.matches("shop.xn--bcher-kva.example", 443));
        assert!(p.matches("SHOP.BÜCHER.example.", 443));
        assert!(!p.matches("shop.bucher.example", 443));
    }

    #[test]
    fn too_broad_patterns_are_refused() {
        for broad in [
            "*",
            "*.com",
            "*.co.uk",
            "*.github.io",
            "*.COM.",
            "*.internal:443",
        ] {
            assert!(
                matches!(HostPattern::parse(broad), Err(HostError::TooBroad { .. })),
                "{broad} accepted"
            );
        }
        assert!(HostPattern::parse("*.example.co.uk").is_ok());
    }

    #[test]
    fn malformed_ports_and_wildcards_are_refused() {
        for bad in [
            "a.com:",
            "a.com:0",
            "a.com:65536",
            "a.com:x",
            "a.com:+1",
            "[::1]:",
        ] {
            assert!(
                matches!(HostPattern::parse(bad), Err(HostError::BadPort { .. })),
                "{bad}"
            );
        }
        for bad in ["a.*.com", "*foo.com", "*.*.com", "*.127.0.0.1"] {
            assert!(
                matches!(HostPattern::parse(bad), Err(HostError::BadWildcard { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn overlap_is_symmetric_and_port_aware() {
        let p = |s| HostPattern::parse(s).unwrap();
        assert!(p("a.example.com").overlaps(&p("*.example.com")));
        assert!(p("*.example.com").overlaps(&p("a.example.com:443")));
        assert!(p("*.a.example.com").overlaps(&p("*.example.com")));
        assert!(!p("a.example.com:80").overlaps(&p("a.example.com:443")));
        assert!(!p("example.com").overlaps(&p("*.example.com")));
        assert!(!p("a.example.org").overlaps(&p("*.example.com")));
    }
}
