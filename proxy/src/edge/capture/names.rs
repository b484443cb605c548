//! The names behind the jail's addresses: each name the resolver answers gets an address
//! of its own from 198.18.0.0/15 (the benchmarking range, RFC 2544, never routed on the
//! internet), and a connection to that address is taken back to its name. Inside the jail
//! every address is local, so the address only has to be distinct, never real.
//!
//! It must never hand one address to two names: the name is what the egress decision, the
//! certificate and the grants are decided on.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Mutex;

/// The first address handed out, and how many there are.
const FIRST: u32 = u32::from_be_bytes([198, 18, 0, 1]);
const COUNT: u32 = (1 << 17) - 2;

/// The name ↔ address map, shared by the resolver and the capture listener.
#[derive(Default)]
pub(crate) struct Names {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    by_name: HashMap<String, Ipv4Addr>,
    by_address: HashMap<Ipv4Addr, String>,
}

impl Names {
    /// The address for `name` (normalised by the caller), the same every time it is asked;
    /// `None` once the range is spent.
    pub(crate) fn address_for(&self, name: &str) -> Option<Ipv4Addr> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(address) = inner.by_name.get(name) {
            return Some(*address);
        }
        let index = u32::try_from(inner.by_name.len()).ok()?;
        if index >= COUNT {
            return None;
        }
        let address = Ipv4Addr::from(FIRST + index);
        inner.by_name.insert(name.to_owned(), address);
        inner.by_address.insert(address, name.to_owned());
        Some(address)
    }

    /// The name an address was handed out for.
    pub(crate) fn name_of(&self, address: IpAddr) -> Option<String> {
        let IpAddr::V4(address) = address else {
            return None;
        };
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.by_address.get(&address).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_name_gets_one_address_of_its_own_and_back() {
        let names = Names::default();
        let a = names.address_for("api.example.com").unwrap();
        let b = names.address_for("pypi.org").unwrap();
        assert_ne!(a, b);
        assert_eq!(names.address_for("api.example.com"), Some(a));
        assert_eq!(a, Ipv4Addr::new(198, 18, 0, 1));
        assert_eq!(names.name_of(IpAddr::V4(b)).as_deref(), Some("pypi.org"));
        assert_eq!(
            names.name_of(IpAddr::V4(Ipv4Addr::new(198, 18, 9, 9))),
            None
        );
        assert_eq!(names.name_of("::1".parse().unwrap()), None);
    }
}
