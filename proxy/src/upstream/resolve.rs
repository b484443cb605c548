//! Name resolution for upstreams: `--resolve` pins first, DNS otherwise, and the address
//! policy on every answer.
//!
//! The addresses returned here are the ones dialled: nothing re-resolves between the check
//! and the dial. A name with any blocked answer is refused whole, since an attacker who
//! controls a zone can mix a public answer with a private one and let the dialler choose.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use super::UpstreamError;
use super::address::{self, Blocked};

/// Host pins (`--resolve HOST=IP`) and the address policy.
#[derive(Debug, Clone)]
pub(crate) struct Resolver {
    pins: HashMap<String, IpAddr>,
}

impl Resolver {
    /// A resolver with the given pins; hosts are already normalised.
    pub(crate) fn new(pins: HashMap<String, IpAddr>) -> Self {
        Self { pins }
    }

    /// The addresses to dial for `host:port`, each checked by `is_allowed` (the address
    /// policy together with `egress.allow_ips`) and against the proxy's own listeners.
    pub(crate) async fn resolve(
        &self,
        host: &str,
        port: u16,
        allow_ips: &(dyn Fn(IpAddr) -> bool + Send + Sync),
        own_listeners: &[SocketAddr],
    ) -> Result<Vec<SocketAddr>, UpstreamError> {
        let answers: Vec<SocketAddr> = if let Some(ip) = self.known_address(host) {
            vec![SocketAddr::new(ip, port)]
        } else {
            tokio::net::lookup_host((host, port))
                .await
                .map_err(|source| UpstreamError::Resolve {
                    host: host.to_owned(),
                    source,
                })?
                .collect()
        };
        check_answers(host, answers, allow_ips, own_listeners)
    }
}

impl Resolver {
    /// The address policy on `host:port` where sluice knows its address without asking DNS
    /// (an IP literal, or a pinned name), for a dial an egress proxy makes for it: the proxy
    /// resolves names itself, but an address the sandbox wrote out is checked here all the
    /// same. Other names pass: their addresses are the egress proxy's to find.
    pub(crate) fn check_known(
        &self,
        host: &str,
        port: u16,
        allow_ips: &(dyn Fn(IpAddr) -> bool + Send + Sync),
        own_listeners: &[SocketAddr],
    ) -> Result<(), UpstreamError> {
        match self.known_address(host) {
            Some(ip) => check_answers(
                host,
                vec![SocketAddr::new(ip, port)],
                allow_ips,
                own_listeners,
            )
            .map(drop),
            None => Ok(()),
        }
    }
}

impl Resolver {
    /// The address sluice knows for `host` without asking DNS: a pinned name's, or the
    /// host's own when it is an address in any spelling a resolver reads as one
    /// (`10.1.2.3`, `::1` with or without brackets, `::ffff:10.1.2.3`, but also
    /// `2130706433` or `0x7f.1`, which are 127.0.0.1 to it). One reading for the direct
    /// dial and for the check before an egress proxy's, so the two never disagree.
    fn known_address(&self, host: &str) -> Option<IpAddr> {
        if let Some(ip) = self.pins.get(host) {
            return Some(*ip);
        }
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = bare.parse::<IpAddr>() {
            return Some(ip);
        }
        match url::Host::parse(host.trim_end_matches('.')).ok()? {
            url::Host::Ipv4(ip) => Some(IpAddr::V4(ip)),
            url::Host::Ipv6(ip) => Some(IpAddr::V6(ip)),
            url::Host::Domain(_) => None,
        }
    }
}

/// Every answer for `host` passes the address policy, or none is dialled.
fn check_answers(
    host: &str,
    answers: Vec<SocketAddr>,
    allow_ips: &(dyn Fn(IpAddr) -> bool + Send + Sync),
    own_listeners: &[SocketAddr],
) -> Result<Vec<SocketAddr>, UpstreamError> {
    if answers.is_empty() {
        return Err(UpstreamError::Resolve {
            host: host.to_owned(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no addresses"),
        });
    }
    for addr in &answers {
        check(*addr, allow_ips, own_listeners).map_err(|why| UpstreamError::Blocked {
            host: host.to_owned(),
            addr: *addr,
            why,
        })?;
    }
    Ok(answers)
}

/// Why a dial was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The address is in a blocked range and `allow_ips` does not cover it.
    Blocked(Blocked),
    /// The address is one of sluice's own listeners: a request loop.
    OwnListener,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Blocked(b) => write!(
                f,
                "{} (add it to egress.allow_ips to permit it)",
                b.describe()
            ),
            Self::OwnListener => f.write_str("it is sluice's own listener"),
        }
    }
}

/// The address policy on one address.
pub(crate) fn check(
    addr: SocketAddr,
    allow_ips: &(dyn Fn(IpAddr) -> bool + Send + Sync),
    own_listeners: &[SocketAddr],
) -> Result<(), Refused> {
    let ip = canonical(addr.ip());
    if own_listeners.iter().any(|own| {
        own.port() == addr.port() && (canonical(own.ip()) == ip || own.ip().is_unspecified())
    }) {
        return Err(Refused::OwnListener);
    }
    match address::classify(ip) {
        Ok(()) => Ok(()),
        Err(_) if allow_ips(ip) => Ok(()),
        Err(blocked) => Err(Refused::Blocked(blocked)),
    }
}

/// IPv4-embedding IPv6 forms are judged (and allowed) as the IPv4 address they reach.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => address::embedded_v4(v6).map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(_: IpAddr) -> bool {
        false
    }
    fn loopback_allowed(ip: IpAddr) -> bool {
        ip == IpAddr::from([127, 0, 0, 1])
    }

    #[test]
    fn a_name_mixing_public_and_private_answers_is_refused_whole() {
        let public: SocketAddr = "93.184.216.34:443".parse().unwrap();
        let answers = |second: &str| vec![public, second.parse().unwrap()];
        for private in [
            "10.0.0.7:443",
            "169.254.169.254:443",
            "[fd00::1]:443",
            "[::1]:443",
        ] {
            match check_answers("mixed.example", answers(private), &none, &[]) {
                Err(UpstreamError::Blocked { addr, .. }) => assert_eq!(addr.to_string(), private),
                other => panic!("{private}: {other:?}"),
            }
        }
        let both_public = vec![public, "1.1.1.1:443".parse().unwrap()];
        let dialled = check_answers("public.example", both_public.clone(), &none, &[]);
        assert_eq!(dialled.unwrap(), both_public);
        assert!(matches!(
            check_answers("empty.example", Vec::new(), &none, &[]),
            Err(UpstreamError::Resolve { .. })
        ));
    }

    #[test]
    fn loopback_needs_allow_ips() {
        let addr: SocketAddr = "127.0.0.1:8443".parse().unwrap();
        assert_eq!(
            check(addr, &none, &[]),
            Err(Refused::Blocked(Blocked::Loopback))
        );
        assert_eq!(check(addr, &loopback_allowed, &[]), Ok(()));
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:8443".parse().unwrap();
        assert_eq!(check(mapped, &loopback_allowed, &[]), Ok(()));
        let other: SocketAddr = "127.0.0.2:8443".parse().unwrap();
        assert!(check(other, &loopback_allowed, &[]).is_err());
    }

    #[test]
    fn own_listener_is_never_dialled_even_when_allowed() {
        let own: SocketAddr = "127.0.0.1:3128".parse().unwrap();
        assert_eq!(
            check(own, &loopback_allowed, &[own]),
            Err(Refused::OwnListener)
        );
        let wildcard: SocketAddr = "0.0.0.0:3128".parse().unwrap();
        assert_eq!(
            check(own, &loopback_allowed, &[wildcard]),
            Err(Refused::OwnListener)
        );
        let elsewhere: SocketAddr = "127.0.0.1:3129".parse().unwrap();
        assert_eq!(check(elsewhere, &loopback_allowed, &[own]), Ok(()));
    }

    #[tokio::test]
    async fn pins_win_over_dns_and_are_checked() {
        let resolver = Resolver::new(HashMap::from([(
            "api.test".to_owned(),
            IpAddr::from([127, 0, 0, 1]),
        )]));
        let addrs = resolver
            .resolve("api.test", 443, &loopback_allowed, &[])
            .await
            .unwrap();
        assert_eq!(addrs, vec!["127.0.0.1:443".parse::<SocketAddr>().unwrap()]);
        let err = resolver.resolve("api.test", 443, &none, &[]).await;
        assert!(matches!(err, Err(UpstreamError::Blocked { .. })));
    }
}
