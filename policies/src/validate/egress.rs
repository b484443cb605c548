//! The `egress:` section: the `allow`, `verbatim`, `passthrough` and `ask` host lists and
//! the `allow_ips` networks, each entry parsed and checked where it was written, and the
//! lists checked against each other (`ask` against the secrets' hosts is `mod.rs`'s, once
//! they are compiled).
//!
//! It owns the egress lists only: it must never judge a secret's hosts (`secret.rs` does,
//! against the passthrough list this hands back), and never resolve a name or touch the
//! network: an `allow_ips` entry is a network written down, not a lookup.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

use super::{Ctx, Pos, push_at};
use crate::error::Problem;
use crate::host::HostPattern;
use crate::raw::RawEgress;

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

/// The egress lists, parsed; each host kept with where it was written, for the lints
/// across lists and secrets.
pub(super) struct Egress {
    pub(super) allow: Vec<(HostPattern, Pos)>,
    pub(super) verbatim: Vec<(HostPattern, Pos)>,
    pub(super) passthrough: Vec<(HostPattern, Pos)>,
    pub(super) ask: Vec<(HostPattern, Pos)>,
    pub(super) allow_ips: Vec<IpNet>,
}

/// Checks the `egress:` section (absent is empty): every host and network entry, the
/// metadata addresses an `allow_ips` entry opens, and hosts both verbatim and passed
/// through.
pub(super) fn egress(cx: &mut Ctx<'_>, egress: Option<&RawEgress>) -> Egress {
    let allow = cx.hosts(egress.and_then(|e| e.allow.as_ref()), "egress.allow");
    let verbatim = cx.hosts(egress.and_then(|e| e.verbatim.as_ref()), "egress.verbatim");
    let passthrough = cx.hosts(
        egress.and_then(|e| e.passthrough.as_ref()),
        "egress.passthrough",
    );
    let ask = cx.hosts(egress.and_then(|e| e.ask.as_ref()), "egress.ask");
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
                push_at(
                    cx,
                    *vpos,
                    "egress.verbatim".into(),
                    Problem::VerbatimPassthrough {
                        verbatim: v.to_string(),
                        passthrough: p.to_string(),
                    },
                );
            }
        }
    }
    // A host asked about must be one nothing else reaches: waiting for a decision on a host
    // the declaration already lets through (or tunnels) would decide nothing.
    for (a, apos) in &ask {
        for (list, patterns) in [
            ("egress.allow", &allow),
            ("egress.verbatim", &verbatim),
            ("egress.passthrough", &passthrough),
        ] {
            if let Some((other, _)) = patterns.iter().find(|(p, _)| a.overlaps(p)) {
                push_at(
                    cx,
                    *apos,
                    "egress.ask".into(),
                    Problem::AskReachable {
                        ask: a.to_string(),
                        other: other.to_string(),
                        list: list.to_owned(),
                    },
                );
            }
        }
    }
    Egress {
        allow,
        verbatim,
        passthrough,
        ask,
        allow_ips,
    }
}

/// Parses `a.b.c.d/len`, `v6/len`, or a bare address (a single-address network).
fn parse_cidr(text: &str) -> Option<IpNet> {
    let text = text.trim();
    if let Ok(net) = text.parse::<IpNet>() {
        return Some(net.trunc());
    }
    text.parse::<IpAddr>().ok().map(IpNet::from)
}

#[cfg(test)]
mod tests {
    use super::*;

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
