//! The tunnel's target, the check that every request inside a tunnel names it, and the
//! check that a target authority holds no secret ([`check_authority`]).
//!
//! Grants are decided on the CONNECT host. A request whose `Host`, `:authority` or
//! absolute-form target names another host would otherwise carry a placeholder swapped
//! for one host to another (HTTP/2 connection coalescing does exactly this), so it gets
//! `421 Misdirected Request` and nothing is dialled.

use http::{HeaderMap, Uri, header::HOST, uri::Authority};
use sluice_guard::{Encoding, Form, Guard};
use sluice_policies::normalize_host;

use crate::refusal::{Code, Refusal};

/// A normalised `host:port`: the CONNECT target of a tunnel, or an absolute-form target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Target {
    /// Lowercased, without a trailing dot, IDNA-normalised; IPv6 without brackets.
    pub host: String,
    /// The port.
    pub port: u16,
}

impl Target {
    /// Parses an authority (`host:port`, or `host` with `default_port`), normalising the host.
    pub(crate) fn parse(authority: &Authority, default_port: Option<u16>) -> Result<Self, Refusal> {
        let port = match (authority.port_u16(), default_port) {
            (Some(port), _) | (None, Some(port)) => port,
            (None, None) => {
                return Err(Refusal::bad_request(format!(
                    "{authority} has no port; CONNECT needs host:port"
                )));
            }
        };
        if port == 0 {
            return Err(Refusal::bad_request(format!(
                "{authority}: port 0 is not a port"
            )));
        }
        if authority.as_str().contains('@') {
            return Err(Refusal::bad_request(format!(
                "{authority}: userinfo is not allowed in an authority"
            )));
        }
        // A port that is no port (`:99999`) is an error, not a reason to assume the default.
        if authority.port_u16().is_none()
            && let Some((_, text)) = authority.as_str().rsplit_once(':')
            && !text.is_empty()
            && !text.ends_with(']')
        {
            return Err(Refusal::bad_request(format!(
                "{authority}: {text} is not a port"
            )));
        }
        let raw = authority.host();
        let bare = raw.trim_start_matches('[').trim_end_matches(']');
        let host = normalize_host(bare)
            .map_err(|e| Refusal::bad_request(format!("{raw} is not a valid host name: {e}")))?;
        Ok(Self { host, port })
    }

    /// The target of a CONNECT request (authority-form, port required).
    pub(crate) fn from_connect(uri: &Uri) -> Result<Self, Refusal> {
        match (uri.authority(), uri.scheme(), uri.path_and_query()) {
            (Some(authority), None, None) => Self::parse(authority, None),
            _ => Err(Refusal::bad_request(format!(
                "CONNECT target {uri} is not in host:port form"
            ))),
        }
    }

    /// `host:port` as a URI authority, with IPv6 in brackets.
    pub(crate) fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.authority())
    }
}

/// Checks that a request inside a TLS tunnel to `tunnel` names the tunnel's host and port
/// in its target and in its `Host` header (when either is present; HTTP/1.1 needs one).
pub(crate) fn check(uri: &Uri, headers: &HeaderMap, tunnel: &Target) -> Result<(), Refusal> {
    let mut named = false;
    if let Some(authority) = uri.authority() {
        match uri.scheme_str() {
            Some("https") | None => {}
            Some(other) => {
                return Err(Refusal::bad_request(format!(
                    "a request inside a TLS tunnel cannot use scheme {other}"
                )));
            }
        }
        same_target(authority, tunnel)?;
        named = true;
    }
    let mut hosts = headers.get_all(HOST).iter();
    match (hosts.next(), hosts.next()) {
        (Some(_), Some(_)) => {
            return Err(Refusal::bad_request("more than one Host header"));
        }
        (Some(value), None) => {
            let authority = value
                .to_str()
                .ok()
                .and_then(|s| s.parse::<Authority>().ok())
                .ok_or_else(|| Refusal::bad_request("the Host header is not a valid authority"))?;
            same_target(&authority, tunnel)?;
            named = true;
        }
        (None, _) => {}
    }
    if named {
        Ok(())
    } else {
        Err(Refusal::bad_request(
            "the request names no host (no Host header, no :authority)",
        ))
    }
}

fn same_target(authority: &Authority, tunnel: &Target) -> Result<(), Refusal> {
    // Nearly every client names the tunnel exactly as it was opened: no normalisation needed.
    let raw = authority.as_str();
    let exact = match raw.rsplit_once(':') {
        Some((host, port)) => host == tunnel.host && port.parse() == Ok(tunnel.port),
        None => raw == tunnel.host && tunnel.port == 443,
    };
    if exact {
        return Ok(());
    }
    let named = Target::parse(authority, Some(443))?;
    if &named == tunnel {
        Ok(())
    } else {
        Err(Refusal::misdirected(
            &named.authority(),
            &tunnel.authority(),
        ))
    }
}

/// Refuses a target authority (a CONNECT target, an absolute-form URI's host) that holds
/// a placeholder or a known value: secrets never go in host names, where a lookup alone
/// would carry them to a resolver. Checked on the authority exactly as the client sent it,
/// before normalisation lowercases it.
pub(crate) fn check_authority(guard: &Guard, raw: &str) -> Result<(), Refusal> {
    let raw = raw.as_bytes();
    // Host names are compared without regard to case, and so are values in them: a lookup
    // of a case-folded value carries it to a resolver just the same.
    let found = guard
        .find_iter(raw)
        .next()
        .map(|hit| (hit.secret, hit.form))
        .or_else(|| {
            let value = guard.values_in_name(raw).first().copied();
            value.map(|secret| (secret, Form::Value(Encoding::Raw)))
        })
        .or_else(|| {
            let placeholder = guard.placeholders_in_name(raw).first().copied();
            placeholder.map(|secret| (secret, Form::Placeholder))
        });
    let Some((secret, form)) = found else {
        return Ok(());
    };
    let secret = guard.name(secret);
    let (code, what) = match form {
        Form::Placeholder => (Code::PlaceholderNotGranted, "a placeholder"),
        Form::Value(_) => (Code::SecretValueRefused, "the real value"),
    };
    Err(Refusal::secret_refused(
        code,
        format!(
            "sluice refused the request: the target host holds {what} of secret {secret}; secrets are never sent in host names"
        ),
        secret,
        "host".to_owned(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderValue, StatusCode};

    fn tunnel() -> Target {
        Target::from_connect(&"API.Example.com.:443".parse().unwrap()).unwrap()
    }

    fn host(value: &str) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert(HOST, HeaderValue::from_str(value).unwrap());
        map
    }

    #[test]
    fn connect_target_is_normalised() {
        assert_eq!(
            tunnel(),
            Target {
                host: "api.example.com".into(),
                port: 443
            }
        );
        assert!(Target::from_connect(&"api.example.com".parse().unwrap()).is_err());
        assert!(Target::from_connect(&"api.example.com:0".parse().unwrap()).is_err());
    }

    #[test]
    fn host_header_must_name_the_tunnel() {
        let path: Uri = "/v1".parse().unwrap();
        for ok in ["api.example.com", "API.EXAMPLE.COM.", "api.example.com:443"] {
            assert_eq!(check(&path, &host(ok), &tunnel()), Ok(()), "{ok}");
        }
        for bad in [
            "other.example.com",
            "api.example.com:8443",
            "api.example.com.evil",
        ] {
            let refusal = check(&path, &host(bad), &tunnel()).unwrap_err();
            assert_eq!(refusal.status, StatusCode::MISDIRECTED_REQUEST, "{bad}");
        }
        assert_eq!(
            check(&path, &HeaderMap::new(), &tunnel())
                .unwrap_err()
                .status,
            StatusCode::BAD_REQUEST
        );
    }

    #[test]
    fn host_with_a_port_and_ipv6_hosts_name_their_tunnel() {
        let path: Uri = "/".parse().unwrap();
        let on_8443 = Target::from_connect(&"api.example.com:8443".parse().unwrap()).unwrap();
        for ok in [
            "api.example.com:8443",
            "API.example.com:8443",
            "api.example.com:08443",
        ] {
            assert_eq!(check(&path, &host(ok), &on_8443), Ok(()), "{ok}");
        }
        for bad in [
            "api.example.com",
            "api.example.com:443",
            "api.example.com:8444",
        ] {
            let refusal = check(&path, &host(bad), &on_8443).unwrap_err();
            assert_eq!(refusal.status, StatusCode::MISDIRECTED_REQUEST, "{bad}");
        }
        // The slow path's normalisation still applies where the fast path does not match.
        // (`+8443` is how Rust and the http crate both read port 8443.)
        for ok in ["api.example.com.:8443", "API.example.com:+8443"] {
            assert_eq!(check(&path, &host(ok), &on_8443), Ok(()), "{ok}");
        }
        // A port no u16 holds was read as the default port before; now it is refused.
        for (name, expected) in [
            ("api.example.com:99999", tunnel()),
            ("api.example.com:84430", on_8443.clone()),
        ] {
            let refusal = check(&path, &host(name), &expected).unwrap_err();
            assert_eq!(refusal.status, StatusCode::BAD_REQUEST, "{name}");
            assert!(
                refusal.message.contains("is not a port"),
                "{}",
                refusal.message
            );
        }
        let userinfo = check(&path, &host("u@api.example.com:8443"), &on_8443).unwrap_err();
        assert_eq!(userinfo.status, StatusCode::BAD_REQUEST);
        let v6 = Target::from_connect(&"[::1]:8443".parse().unwrap()).unwrap();
        assert_eq!(check(&path, &host("[::1]:8443"), &v6), Ok(()));
        assert_eq!(
            check(&path, &host("[::1]:443"), &v6).unwrap_err().status,
            StatusCode::MISDIRECTED_REQUEST
        );
    }

    #[test]
    fn absolute_target_and_authority_must_name_the_tunnel() {
        let good: Uri = "https://api.example.com/v1".parse().unwrap();
        assert_eq!(check(&good, &HeaderMap::new(), &tunnel()), Ok(()));
        let bad: Uri = "https://evil.test/v1".parse().unwrap();
        assert_eq!(
            check(&bad, &host("api.example.com"), &tunnel())
                .unwrap_err()
                .status,
            StatusCode::MISDIRECTED_REQUEST
        );
        // Target right, Host wrong: still refused.
        assert_eq!(
            check(&good, &host("evil.test"), &tunnel())
                .unwrap_err()
                .status,
            StatusCode::MISDIRECTED_REQUEST
        );
        let plain: Uri = "http://api.example.com/v1".parse().unwrap();
        assert_eq!(
            check(&plain, &HeaderMap::new(), &tunnel())
                .unwrap_err()
                .status,
            StatusCode::BAD_REQUEST
        );
    }

    #[test]
    fn duplicate_host_headers_are_refused() {
        let mut headers = host("api.example.com");
        headers.append(HOST, HeaderValue::from_static("api.example.com"));
        assert_eq!(
            check(&"/".parse().unwrap(), &headers, &tunnel())
                .unwrap_err()
                .status,
            StatusCode::BAD_REQUEST
        );
    }
}
