//! The address policy: which resolved addresses sluice may dial.
//!
//! Checked on the exact address that will be dialled, after resolution, never on a name.
//! Loopback, private, link-local (cloud metadata among them), unique-local, CGNAT,
//! multicast, reserved and unspecified addresses are refused unless `egress.allow_ips`
//! covers them. IPv6 forms that embed an IPv4 address (mapped, NAT64, 6to4) are judged by
//! the address they embed, so `::ffff:127.0.0.1` is loopback. Unknown means deny.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address may not be dialled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Blocked {
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// `10/8`, `172.16/12`, `192.168/16`.
    Private,
    /// `169.254/16`, `fe80::/10`: link-local, where cloud metadata services live.
    LinkLocal,
    /// `169.254.169.254` and its IPv6 twin `fd00:ec2::254`.
    CloudMetadata,
    /// `fc00::/7`.
    UniqueLocal,
    /// `100.64/10`, carrier-grade NAT.
    SharedAddressSpace,
    /// `224/4`, `ff00::/8`.
    Multicast,
    /// `0.0.0.0/8`, `::`.
    Unspecified,
    /// Documentation, benchmarking, reserved and other special-purpose ranges.
    Reserved,
}

impl Blocked {
    /// A short description for refusals and the audit log.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Self::Loopback => "a loopback address",
            Self::Private => "a private address",
            Self::LinkLocal => "a link-local address",
            Self::CloudMetadata => "a cloud metadata address",
            Self::UniqueLocal => "a unique-local address",
            Self::SharedAddressSpace => "a carrier-grade NAT address",
            Self::Multicast => "a multicast address",
            Self::Unspecified => "an unspecified address",
            Self::Reserved => "a reserved or special-purpose address",
        }
    }
}

/// Classifies an address: `Ok(())` for a public unicast address, the reason otherwise.
/// Does not consult `allow_ips`; the caller does, on the same address.
pub(crate) fn classify(ip: IpAddr) -> Result<(), Blocked> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

/// The IPv4 address an IPv6 address stands for, if it embeds one in a form that routes to
/// it: IPv4-mapped (`::ffff:a.b.c.d`), IPv4-compatible (`::a.b.c.d`), NAT64
/// (`64:ff9b::/96`) and 6to4 (`2002::/16`).
pub(crate) fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let o = v6.octets();
    let tail = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] => Some(tail),
        [0, 0, 0, 0, 0, 0, hi, _] if hi != 0 => Some(tail),
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(tail),
        [0x2002, a, b, ..] => Some(Ipv4Addr::new(
            (a >> 8) as u8,
            a as u8,
            (b >> 8) as u8,
            b as u8,
        )),
        _ => None,
    }
}

fn classify_v4(ip: Ipv4Addr) -> Result<(), Blocked> {
    let [a, b, c, _] = ip.octets();
    if ip == Ipv4Addr::new(169, 254, 169, 254) {
        return Err(Blocked::CloudMetadata);
    }
    match (a, b, c) {
        (0, ..) => Err(Blocked::Unspecified),
        (127, ..) => Err(Blocked::Loopback),
        (10, ..) | (172, 16..=31, _) | (192, 168, _) => Err(Blocked::Private),
        (169, 254, _) => Err(Blocked::LinkLocal),
        (100, 64..=127, _) => Err(Blocked::SharedAddressSpace),
        (224..=239, ..) => Err(Blocked::Multicast),
        (240..=255, ..) => Err(Blocked::Reserved),
        (192, 0, 0) | (192, 0, 2) | (198, 51, 100) | (203, 0, 113) | (198, 18..=19, _) => {
            Err(Blocked::Reserved)
        }
        _ => Ok(()),
    }
}

fn classify_v6(ip: Ipv6Addr) -> Result<(), Blocked> {
    if let Some(v4) = embedded_v4(ip) {
        return classify_v4(v4);
    }
    let s = ip.segments();
    if ip.is_unspecified() {
        return Err(Blocked::Unspecified);
    }
    if ip.is_loopback() {
        return Err(Blocked::Loopback);
    }
    if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        return Err(Blocked::CloudMetadata);
    }
    match s[0] {
        0xfe80..=0xfebf => Err(Blocked::LinkLocal),
        0xfec0..=0xfeff => Err(Blocked::Reserved), // deprecated site-local
        0xfc00..=0xfdff => Err(Blocked::UniqueLocal),
        0xff00..=0xffff => Err(Blocked::Multicast),
        // 2000::/3 is the only global unicast space; documentation, Teredo, ORCHID and
        // the discard prefix sit inside it and are refused explicitly.
        0x2000..=0x3fff => match s {
            [0x2001, 0xdb8, ..] | [0x3fff, 0..=0x0fff, ..] => Err(Blocked::Reserved),
            [0x2001, 0, ..] => Err(Blocked::Reserved), // Teredo tunnels to arbitrary IPv4
            [0x2001, 0x10..=0x2f, ..] => Err(Blocked::Reserved), // ORCHID
            _ => Ok(()),
        },
        _ => Err(Blocked::Reserved),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn public_addresses_pass_and_special_ones_are_blocked() {
        let cases: &[(&str, Result<(), Blocked>)] = &[
            ("93.184.216.34", Ok(())),
            ("8.8.8.8", Ok(())),
            ("2606:4700::1111", Ok(())),
            ("127.0.0.1", Err(Blocked::Loopback)),
            ("127.1.2.3", Err(Blocked::Loopback)),
            ("::1", Err(Blocked::Loopback)),
            ("10.1.2.3", Err(Blocked::Private)),
            ("172.16.0.1", Err(Blocked::Private)),
            ("172.31.255.255", Err(Blocked::Private)),
            ("172.32.0.1", Ok(())),
            ("192.168.1.1", Err(Blocked::Private)),
            ("169.254.169.254", Err(Blocked::CloudMetadata)),
            ("169.254.1.1", Err(Blocked::LinkLocal)),
            ("fd00:ec2::254", Err(Blocked::CloudMetadata)),
            ("fe80::1", Err(Blocked::LinkLocal)),
            ("fc00::1", Err(Blocked::UniqueLocal)),
            ("fd12:3456::1", Err(Blocked::UniqueLocal)),
            ("100.64.0.1", Err(Blocked::SharedAddressSpace)),
            ("100.128.0.1", Ok(())),
            ("224.0.0.1", Err(Blocked::Multicast)),
            ("ff02::1", Err(Blocked::Multicast)),
            ("0.0.0.0", Err(Blocked::Unspecified)),
            ("::", Err(Blocked::Unspecified)),
            ("255.255.255.255", Err(Blocked::Reserved)),
            ("192.0.2.1", Err(Blocked::Reserved)),
            ("2001:db8::1", Err(Blocked::Reserved)),
            ("::ffff:127.0.0.1", Err(Blocked::Loopback)),
            ("::ffff:169.254.169.254", Err(Blocked::CloudMetadata)),
            ("::ffff:8.8.8.8", Ok(())),
            ("64:ff9b::a00:1", Err(Blocked::Private)),
            ("2002:7f00:1::", Err(Blocked::Loopback)),
            ("::127.0.0.1", Err(Blocked::Loopback)),
            ("2001:0:4136:e378::1", Err(Blocked::Reserved)),
        ];
        for (addr, want) in cases {
            assert_eq!(classify(ip(addr)), *want, "{addr}");
        }
    }
}
