//! Host patterns and leaf names: parsing, normalisation, the match between them, and the
//! X.509 name constraints they become.
//!
//! This module decides which names the run CA may ever certify. It must never accept a name
//! it cannot normalise (non-ASCII, wildcards inside a label, a port on a leaf name), and never
//! widen a pattern: `*.example.com` covers names under `example.com`, never the apex.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv6Addr};

use rcgen::{CidrSubnet, GeneralSubtree, NameConstraints};
use rustls_pki_types::DnsName;

use crate::error::{CaError, quote};

/// One name a leaf certificate carries: a normalised DNS name or an IP address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum LeafName {
    /// A lowercase DNS name without a trailing dot.
    Dns(String),
    /// An IP literal.
    Ip(IpAddr),
}

impl LeafName {
    /// Parses a name asked of the CA (an SNI or a CONNECT host without its port).
    ///
    /// Accepts an ASCII DNS name (any case, one optional trailing dot), an IPv4 literal, or an
    /// IPv6 literal with or without brackets. Refuses wildcards and ports.
    pub(crate) fn parse(name: &str) -> Result<Self, CaError> {
        let invalid = |reason| CaError::InvalidName {
            name: quote(name),
            reason,
        };
        if name.is_empty() {
            return Err(invalid("it is empty"));
        }
        if !name.is_ascii() {
            return Err(invalid("it is not ASCII (pass the IDNA/punycode form)"));
        }
        let lower = name.to_ascii_lowercase();
        if let Some(inner) = lower.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            return inner
                .parse::<Ipv6Addr>()
                .map(|ip| Self::Ip(IpAddr::V6(ip)))
                .map_err(|_| invalid("a bracketed name must be an IPv6 literal"));
        }
        if let Ok(ip) = lower.parse::<IpAddr>() {
            return Ok(Self::Ip(ip));
        }
        let host = lower.strip_suffix('.').unwrap_or(&lower);
        if host.contains('*') {
            return Err(invalid("wildcard leaves are never minted"));
        }
        check_dns(host).map_err(invalid)?;
        Ok(Self::Dns(host.to_owned()))
    }

    /// The name as text, the key of the leaf cache.
    pub(crate) fn key(&self) -> String {
        match self {
            Self::Dns(name) => name.clone(),
            Self::Ip(ip) => ip.to_string(),
        }
    }
}

/// The set of names the run CA may certify, built from the caller's host patterns.
#[derive(Debug, Clone, Default)]
pub(crate) struct Permitted {
    /// Exact DNS names (`api.example.com`).
    exact: BTreeSet<String>,
    /// Suffixes of wildcard patterns (`example.com` for `*.example.com`).
    suffixes: BTreeSet<String>,
    /// IP literals.
    ips: BTreeSet<IpAddr>,
}

impl Permitted {
    /// Parses every pattern; the first malformed one is an error.
    pub(crate) fn parse<S: AsRef<str>>(patterns: &[S]) -> Result<Self, CaError> {
        let mut permitted = Self::default();
        for pattern in patterns {
            match parse_pattern(pattern.as_ref())? {
                Pattern::Exact(name) => permitted.exact.insert(name),
                Pattern::Wildcard(suffix) => permitted.suffixes.insert(suffix),
                Pattern::Ip(ip) => permitted.ips.insert(ip),
            };
        }
        Ok(permitted)
    }

    /// Whether a leaf for `name` may be minted.
    pub(crate) fn permits(&self, name: &LeafName) -> bool {
        match name {
            LeafName::Ip(ip) => self.ips.contains(ip),
            LeafName::Dns(name) => {
                self.exact.contains(name)
                    || self.suffixes.iter().any(|suffix| {
                        name.len() > suffix.len() + 1
                            && name.ends_with(suffix.as_str())
                            && name.as_bytes()[name.len() - suffix.len() - 1] == b'.'
                    })
            }
        }
    }

    /// Whether every name `pattern` (as [`Permitted::parse`] takes it) stands for may be
    /// minted: an exact name or IP as [`Permitted::permits`] says, a wildcard when the same
    /// or a wider wildcard is permitted.
    pub(crate) fn covers(&self, pattern: &str) -> Result<bool, CaError> {
        Ok(match parse_pattern(pattern)? {
            Pattern::Exact(name) => self.permits(&LeafName::Dns(name)),
            Pattern::Ip(ip) => self.ips.contains(&ip),
            Pattern::Wildcard(suffix) => self.suffixes.iter().any(|wider| {
                suffix == *wider
                    || (suffix.len() > wider.len() + 1
                        && suffix.ends_with(wider.as_str())
                        && suffix.as_bytes()[suffix.len() - wider.len() - 1] == b'.')
            }),
        })
    }

    /// The X.509 name constraints of the CA certificate.
    ///
    /// DNS names and suffixes become permitted dNSName subtrees (a subtree also covers the
    /// names below it: that is what RFC 5280 offers; [`Permitted::permits`] is the stricter
    /// check the crate applies before it signs). IP literals become /32 or /128 permitted
    /// subtrees. Every family with nothing permitted is excluded outright: `0.0.0.0/0`,
    /// `::/0`, and the empty dNSName (which matches every DNS name) when no host is given.
    pub(crate) fn name_constraints(&self) -> NameConstraints {
        let mut permitted_subtrees = Vec::new();
        let mut excluded_subtrees = Vec::new();
        let dns: BTreeSet<&String> = self.exact.iter().chain(&self.suffixes).collect();
        if dns.is_empty() {
            excluded_subtrees.push(GeneralSubtree::DnsName(String::new()));
        }
        permitted_subtrees.extend(dns.into_iter().cloned().map(GeneralSubtree::DnsName));
        for ip in &self.ips {
            let prefix = if ip.is_ipv4() { 32 } else { 128 };
            permitted_subtrees.push(GeneralSubtree::IpAddress(CidrSubnet::from_addr_prefix(
                *ip, prefix,
            )));
        }
        if !self.ips.iter().any(IpAddr::is_ipv4) {
            excluded_subtrees.push(GeneralSubtree::IpAddress(CidrSubnet::from_v4_prefix(
                [0; 4], 0,
            )));
        }
        if !self.ips.iter().any(IpAddr::is_ipv6) {
            excluded_subtrees.push(GeneralSubtree::IpAddress(CidrSubnet::from_v6_prefix(
                [0; 16], 0,
            )));
        }
        NameConstraints {
            permitted_subtrees,
            excluded_subtrees,
        }
    }
}

/// One parsed host pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    Exact(String),
    Wildcard(String),
    Ip(IpAddr),
}

/// Parses one host pattern: `host`, `*.suffix`, or an IP literal, each with an optional port
/// (dropped: ports are not part of name constraints).
fn parse_pattern(pattern: &str) -> Result<Pattern, CaError> {
    let invalid = |reason| CaError::InvalidPattern {
        pattern: quote(pattern),
        reason,
    };
    if pattern.is_empty() {
        return Err(invalid("it is empty"));
    }
    if !pattern.is_ascii() {
        return Err(invalid("it is not ASCII (pass the IDNA/punycode form)"));
    }
    let lower = pattern.to_ascii_lowercase();

    // `[v6]` or `[v6]:port`.
    if let Some(rest) = lower.strip_prefix('[') {
        let (inner, after) = rest
            .split_once(']')
            .ok_or_else(|| invalid("an opening `[` has no closing `]`"))?;
        if !after.is_empty() {
            let port = after
                .strip_prefix(':')
                .ok_or_else(|| invalid("only `:port` may follow `]`"))?;
            check_port(port).map_err(invalid)?;
        }
        return inner
            .parse::<Ipv6Addr>()
            .map(|ip| Pattern::Ip(IpAddr::V6(ip)))
            .map_err(|_| invalid("a bracketed host must be an IPv6 literal"));
    }
    // A bare IPv6 literal has several colons and no port.
    if let Ok(ip) = lower.parse::<IpAddr>() {
        return Ok(Pattern::Ip(ip));
    }
    let host = match lower.split_once(':') {
        Some((host, port)) => {
            check_port(port).map_err(invalid)?;
            host
        }
        None => lower.as_str(),
    };
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(Pattern::Ip(ip));
    }
    let host = host.strip_suffix('.').unwrap_or(host);
    if let Some(suffix) = host.strip_prefix("*.") {
        if suffix.contains('*') {
            return Err(invalid("only the leftmost label may be `*`"));
        }
        if suffix.parse::<IpAddr>().is_ok() {
            return Err(invalid("a wildcard cannot stand in front of an IP literal"));
        }
        check_dns(suffix).map_err(invalid)?;
        return Ok(Pattern::Wildcard(suffix.to_owned()));
    }
    if host.contains('*') {
        return Err(invalid(
            "a wildcard must be the whole leftmost label, as in `*.example.com`",
        ));
    }
    check_dns(host).map_err(invalid)?;
    Ok(Pattern::Exact(host.to_owned()))
}

/// A port is 1 to 65535 in decimal.
fn check_port(port: &str) -> Result<(), &'static str> {
    match port.parse::<u16>() {
        Ok(0) | Err(_) => Err("the port is not a number from 1 to 65535"),
        Ok(_) if !port.bytes().all(|b| b.is_ascii_digit()) => {
            Err("the port is not a number from 1 to 65535")
        }
        Ok(_) => Ok(()),
    }
}

/// A DNS name in the sense of RFC 1035/5890 as rustls validates it, with no trailing dot left.
fn check_dns(host: &str) -> Result<(), &'static str> {
    if host.is_empty() {
        return Err("the host name is empty");
    }
    if host.ends_with('.') {
        return Err("it has more than one trailing dot");
    }
    DnsName::try_from(host)
        .map(|_| ())
        .map_err(|_| "it is not a valid DNS name")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(text: &str) -> Result<Pattern, CaError> {
        parse_pattern(text)
    }

    #[test]
    fn patterns_parse_to_their_normal_form() {
        let cases: &[(&str, Pattern)] = &[
            ("api.github.com", Pattern::Exact("api.github.com".into())),
            ("API.GitHub.com.", Pattern::Exact("api.github.com".into())),
            (
                "api.github.com:443",
                Pattern::Exact("api.github.com".into()),
            ),
            (
                "*.githubusercontent.com",
                Pattern::Wildcard("githubusercontent.com".into()),
            ),
            (
                "*.example.com:8443",
                Pattern::Wildcard("example.com".into()),
            ),
            ("localhost", Pattern::Exact("localhost".into())),
            ("127.0.0.1", Pattern::Ip("127.0.0.1".parse().unwrap())),
            ("192.0.2.7:8080", Pattern::Ip("192.0.2.7".parse().unwrap())),
            ("::1", Pattern::Ip("::1".parse().unwrap())),
            ("[2001:db8::1]", Pattern::Ip("2001:db8::1".parse().unwrap())),
            (
                "[2001:db8::1]:443",
                Pattern::Ip("2001:db8::1".parse().unwrap()),
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(&pattern(text).unwrap(), expected, "{text}");
        }
    }

    #[test]
    fn a_pattern_is_covered_only_by_constraints_as_wide_or_wider() {
        let permitted = Permitted::parse(&["api.test", "*.example.com", "127.0.0.1"]).unwrap();
        let cases = [
            ("api.test", true),
            ("API.test:8443", true),
            ("other.test", false),
            ("*.api.test", false),
            ("a.example.com", true),
            ("*.example.com", true),
            ("*.deep.example.com", true),
            ("*.xexample.com", false),
            ("example.com", false),
            ("127.0.0.1", true),
            ("127.0.0.2", false),
        ];
        for (pattern, covered) in cases {
            assert_eq!(permitted.covers(pattern).unwrap(), covered, "{pattern}");
        }
        assert!(permitted.covers("*.").is_err());
    }

    #[test]
    fn malformed_patterns_are_refused() {
        let cases = [
            "",
            "*",
            "*.",
            "a.*.example.com",
            "*a.example.com",
            "*.*.example.com",
            "*.192.0.2.1",
            "exa mple.com",
            "example.com:0",
            "example.com:99999",
            "example.com:http",
            "example.com:+80",
            "example..com",
            "example.com..",
            "-example.com",
            "bücher.example",
            "[192.0.2.1]",
            "[::1",
            "[::1]x",
            "1.2.3.999",
        ];
        for text in cases {
            let error = pattern(text).unwrap_err();
            assert!(
                matches!(error, CaError::InvalidPattern { .. }),
                "{text}: {error}"
            );
        }
    }

    #[test]
    fn leaf_names_normalise_and_refuse_what_is_not_one_name() {
        assert_eq!(
            LeafName::parse("API.Example.COM.").unwrap(),
            LeafName::Dns("api.example.com".into())
        );
        assert_eq!(
            LeafName::parse("[::1]").unwrap(),
            LeafName::Ip("::1".parse().unwrap())
        );
        assert_eq!(
            LeafName::parse("192.0.2.1").unwrap(),
            LeafName::Ip("192.0.2.1".parse().unwrap())
        );
        for bad in [
            "",
            "*.example.com",
            "api.example.com:443",
            "a b",
            "ex\u{e4}mple.com",
            "[192.0.2.1]",
            "x..y",
        ] {
            assert!(
                matches!(LeafName::parse(bad), Err(CaError::InvalidName { .. })),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn exact_names_match_only_themselves() {
        let permitted = Permitted::parse(&["api.github.com"]).unwrap();
        assert!(permitted.permits(&LeafName::parse("api.github.com").unwrap()));
        assert!(!permitted.permits(&LeafName::parse("x.api.github.com").unwrap()));
        assert!(!permitted.permits(&LeafName::parse("github.com").unwrap()));
        assert!(!permitted.permits(&LeafName::parse("xapi.github.com").unwrap()));
    }

    #[test]
    fn wildcards_match_one_or_more_labels_but_never_the_apex() {
        let permitted = Permitted::parse(&["*.example.com"]).unwrap();
        assert!(permitted.permits(&LeafName::parse("a.example.com").unwrap()));
        assert!(permitted.permits(&LeafName::parse("a.b.example.com").unwrap()));
        assert!(!permitted.permits(&LeafName::parse("example.com").unwrap()));
        assert!(!permitted.permits(&LeafName::parse("badexample.com").unwrap()));
        assert!(!permitted.permits(&LeafName::parse("example.com.evil.test").unwrap()));
    }

    #[test]
    fn ips_match_only_when_listed() {
        let permitted = Permitted::parse(&["127.0.0.1", "api.example.com"]).unwrap();
        assert!(permitted.permits(&LeafName::parse("127.0.0.1").unwrap()));
        assert!(!permitted.permits(&LeafName::parse("127.0.0.2").unwrap()));
        assert!(!permitted.permits(&LeafName::parse("::1").unwrap()));
    }

    #[test]
    fn constraints_exclude_every_family_nothing_permits() {
        let only_dns = Permitted::parse(&["api.example.com", "*.example.org"])
            .unwrap()
            .name_constraints();
        assert_eq!(
            only_dns.permitted_subtrees,
            vec![
                GeneralSubtree::DnsName("api.example.com".into()),
                GeneralSubtree::DnsName("example.org".into()),
            ]
        );
        assert_eq!(
            only_dns.excluded_subtrees,
            vec![
                GeneralSubtree::IpAddress(CidrSubnet::from_v4_prefix([0; 4], 0)),
                GeneralSubtree::IpAddress(CidrSubnet::from_v6_prefix([0; 16], 0)),
            ]
        );

        let v4 = Permitted::parse(&["127.0.0.1"]).unwrap().name_constraints();
        assert_eq!(
            v4.permitted_subtrees,
            vec![GeneralSubtree::IpAddress(CidrSubnet::from_v4_prefix(
                [127, 0, 0, 1],
                32
            ))]
        );
        assert_eq!(
            v4.excluded_subtrees,
            vec![
                GeneralSubtree::DnsName(String::new()),
                GeneralSubtree::IpAddress(CidrSubnet::from_v6_prefix([0; 16], 0)),
            ]
        );

        let nothing = Permitted::parse::<&str>(&[]).unwrap().name_constraints();
        assert!(nothing.permitted_subtrees.is_empty());
        assert_eq!(nothing.excluded_subtrees.len(), 3);
    }

    #[test]
    fn duplicate_subtrees_collapse() {
        let constraints =
            Permitted::parse(&["a.example.com", "A.example.com.", "a.example.com:443"])
                .unwrap()
                .name_constraints();
        assert_eq!(constraints.permitted_subtrees.len(), 1);
    }
}
