//! A tunnel's own state: the target its grants were decided for, where its requests go
//! upstream, the plans decided for it, and the connection slot it holds.
//!
//! `connect` builds a [`Tunnel`] once per intercepted CONNECT; `forward` reads it for each
//! request inside. A [`Origin`] is also made per plain request, which has no tunnel.

use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderValue, Uri};

use crate::generation::shared::ConnSlot;
use crate::linger::LingerSwitch;
use crate::refusal::Refusal;
use crate::scan::request::PlanCache;
use crate::tls::target::Target;

/// What every request of one intercepted tunnel shares.
pub(crate) struct Tunnel {
    /// The CONNECT target, which the grants were decided for.
    pub target: Target,
    /// Where its requests go upstream, formatted once for all of them.
    pub origin: Origin,
    /// The plans, decided once per tunnel and place.
    pub plans: PlanCache,
    /// The client connection's slot. Whatever outlives a request (an upgraded connection)
    /// holds a clone, so that the connection limit and the drain at shutdown count it.
    pub slot: ConnSlot,
    /// The client connection's lingering close (`linger`), turned off when the
    /// connection is upgraded: the relay reads it to its end itself.
    pub linger: LingerSwitch,
}

/// The origin (RFC 6454: scheme, host, port) a target is reached at, as a request names it:
/// the authority of the request's URI and its `Host` header. The [`Target`] is what grants
/// are decided for; the origin is where the request goes. Made once per tunnel, since every
/// request on one goes to the same place; once per request in the clear.
pub(crate) struct Origin {
    scheme: Scheme,
    authority: Authority,
    host: HeaderValue,
}

impl Origin {
    /// The origin of requests toward `target` over `scheme`.
    pub(crate) fn new(target: &Target, scheme: Scheme) -> Result<Self, Refusal> {
        let authority = target
            .authority()
            .parse()
            .map_err(|_| Refusal::bad_request("the target is not a valid authority"))?;
        Ok(Self {
            host: host_header(target, &scheme)?,
            scheme,
            authority,
        })
    }

    /// `host:port`, IPv6 in brackets: what the audit log calls the host.
    pub(crate) fn authority(&self) -> &str {
        self.authority.as_str()
    }

    /// The `Host` header sent upstream: the target, without a default port.
    pub(crate) fn host_header(&self) -> HeaderValue {
        self.host.clone()
    }

    /// The absolute URI a request for `path` is sent upstream with.
    pub(crate) fn uri(&self, path: Option<&PathAndQuery>) -> Result<Uri, Refusal> {
        let mut uri = http::uri::Parts::default();
        uri.scheme = Some(self.scheme.clone());
        uri.authority = Some(self.authority.clone());
        uri.path_and_query = Some(
            path.cloned()
                .unwrap_or_else(|| PathAndQuery::from_static("/")),
        );
        Uri::from_parts(uri)
            .map_err(|_| Refusal::bad_request("the request target is not a valid URI"))
    }
}

fn host_header(target: &Target, scheme: &Scheme) -> Result<HeaderValue, Refusal> {
    let default_port = if *scheme == Scheme::HTTPS { 443 } else { 80 };
    let host = if target.port == default_port {
        if target.host.contains(':') {
            format!("[{}]", target.host)
        } else {
            target.host.clone()
        }
    } else {
        target.authority()
    };
    HeaderValue::from_str(&host).map_err(|_| Refusal::bad_request("the target is not a valid host"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(host: &str, port: u16) -> Target {
        Target {
            host: host.to_owned(),
            port,
        }
    }

    #[test]
    fn host_header_leaves_out_the_default_port_only() {
        let cases = [
            (
                target("api.test", 443),
                Scheme::HTTPS,
                "api.test",
                "api.test:443",
            ),
            (
                target("api.test", 8443),
                Scheme::HTTPS,
                "api.test:8443",
                "api.test:8443",
            ),
            (
                target("api.test", 80),
                Scheme::HTTP,
                "api.test",
                "api.test:80",
            ),
            (
                target("api.test", 443),
                Scheme::HTTP,
                "api.test:443",
                "api.test:443",
            ),
            (target("::1", 443), Scheme::HTTPS, "[::1]", "[::1]:443"),
        ];
        for (target, scheme, host, authority) in cases {
            let origin = Origin::new(&target, scheme).unwrap();
            assert_eq!(origin.host_header(), host, "{target:?}");
            assert_eq!(origin.authority(), authority, "{target:?}");
        }
    }

    #[test]
    fn the_upstream_uri_keeps_the_path_and_query_and_defaults_to_root() {
        let origin = Origin::new(&target("api.test", 8443), Scheme::HTTPS).unwrap();
        let path = PathAndQuery::from_static("/v1/x?q=1");
        assert_eq!(
            origin.uri(Some(&path)).unwrap(),
            "https://api.test:8443/v1/x?q=1"
        );
        assert_eq!(origin.uri(None).unwrap(), "https://api.test:8443/");
    }
}
