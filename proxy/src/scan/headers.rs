//! Header hygiene on both legs: hop-by-hop headers removed, ambiguous framing refused.
//!
//! Hop-by-hop headers describe one connection and must not cross the proxy; the proxy's own
//! credentials (`Proxy-Authorization`) above all. Framing that two parsers could read two
//! ways is refused, never repaired: that is how requests are smuggled.

use http::header::{self, HeaderName};
use http::{HeaderMap, HeaderValue};

use crate::refusal::Refusal;

/// Headers that never cross the proxy, besides those a `Connection` header names.
const HOP_BY_HOP: [HeaderName; 9] = [
    header::CONNECTION,
    // Only means something beside `Upgrade: h2c`, which never crosses either (see
    // `upgrade_protocol`).
    HeaderName::from_static("http2-settings"),
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    HeaderName::from_static("proxy-connection"),
    header::TE,
    header::TRAILER,
    header::UPGRADE,
];

/// Removes hop-by-hop headers, including every header the `Connection` header names, and
/// `Transfer-Encoding`: hyper frames each leg itself.
///
/// One `TE` token crosses, as exactly `te: trailers`: the only `TE` HTTP/2 allows, and one
/// that gRPC servers require (they reset a stream without it). It says the client accepts
/// trailers, which sluice passes on (rewritten). Any other token is dropped.
pub(crate) fn remove_hop_by_hop(headers: &mut HeaderMap) {
    let trailers = headers
        .get_all(header::TE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|token| {
            // A token's parameters (`trailers;q=1`) do not change what it names.
            let name = token.split(';').next().unwrap_or("");
            name.trim().eq_ignore_ascii_case("trailers")
        });
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    // One pass over the few headers a message has, rather than a lookup per listed name:
    // most messages carry none of them.
    let listed: Vec<HeaderName> = headers
        .keys()
        .filter(|name| HOP_BY_HOP.contains(name) || **name == header::TRANSFER_ENCODING)
        .cloned()
        .collect();
    for name in named.iter().chain(&listed) {
        headers.remove(name);
    }
    if trailers {
        headers.insert(header::TE, HeaderValue::from_static("trailers"));
    }
}

/// The protocol an HTTP/1.1 request asks to upgrade to (`Connection: upgrade` with an
/// `Upgrade` header), if it is one sluice carries: WebSocket only.
///
/// After a `101` only WebSocket is carried: its frames are parsed and each message
/// scanned by the WebSocket relay, which reads no other protocol. Any other
/// protocol (`h2c`, cleartext HTTP/2 that would carry HTTP past the scan; `TLS/1.0`; made-up
/// ones) is no upgrade: the request goes on as a plain HTTP/1.1 request, its `Upgrade`
/// headers removed as hop-by-hop.
pub(crate) fn upgrade_protocol(
    version: &http::Version,
    headers: &HeaderMap,
) -> Option<http::HeaderValue> {
    if *version != http::Version::HTTP_11 {
        return None;
    }
    let tokens = |name: header::HeaderName| {
        headers
            .get_all(name)
            .into_iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map(str::trim)
    };
    let wants = tokens(header::CONNECTION).any(|t| t.eq_ignore_ascii_case("upgrade"));
    // Exactly one protocol, and it is WebSocket: a list would let the upstream pick another.
    let mut protocols = tokens(header::UPGRADE);
    let only_websocket = matches!(
        (protocols.next(), protocols.next()),
        (Some(first), None) if first.eq_ignore_ascii_case("websocket")
    );
    if wants && only_websocket {
        headers.get(header::UPGRADE).cloned()
    } else {
        None
    }
}

/// Refuses a request head (target and headers) larger than `limit` bytes. hyper bounds
/// its read buffer, which usually stops such a head first; this is the exact bound.
pub(crate) fn check_head_size(
    uri: &http::Uri,
    headers: &HeaderMap,
    limit: usize,
) -> Result<(), Refusal> {
    let target = uri.authority().map_or(0, |a| a.as_str().len())
        + uri.path_and_query().map_or(0, |p| p.as_str().len());
    let size = target
        + headers
            .iter()
            .map(|(name, value)| name.as_str().len() + value.len() + 4)
            .sum::<usize>();
    if size > limit {
        Err(Refusal::head_too_large(size, limit))
    } else {
        Ok(())
    }
}

/// Refuses framing that could be read two ways: `Content-Length` together with
/// `Transfer-Encoding`, or several `Content-Length` values.
pub(crate) fn check_framing(headers: &HeaderMap) -> Result<(), Refusal> {
    let lengths = headers.get_all(header::CONTENT_LENGTH).iter().count();
    if lengths > 1 {
        return Err(Refusal::bad_request(
            "more than one Content-Length header; send exactly one",
        ));
    }
    if lengths == 1 && headers.contains_key(header::TRANSFER_ENCODING) {
        return Err(Refusal::bad_request(
            "both Content-Length and Transfer-Encoding; send one or the other",
        ));
    }
    // A transfer coding besides `chunked` (`gzip, chunked`) would leave the body coded where
    // the scan reads it, and sluice does not send request bodies in transfer codings.
    let codings = headers
        .get_all(header::TRANSFER_ENCODING)
        .iter()
        .flat_map(|v| v.to_str().unwrap_or("?").split(','))
        .map(str::trim)
        .filter(|t| !t.is_empty());
    if codings
        .into_iter()
        .any(|t| !t.eq_ignore_ascii_case("chunked"))
    {
        return Err(Refusal::bad_request(
            "a request body in a transfer coding other than chunked cannot be scanned; send it with Content-Encoding instead",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_and_connection_named_headers_are_removed() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, x-secret-hop"),
        );
        headers.insert("x-secret-hop", HeaderValue::from_static("1"));
        headers.insert(
            header::PROXY_AUTHORIZATION,
            HeaderValue::from_static("Basic eA=="),
        );
        headers.insert("proxy-connection", HeaderValue::from_static("keep-alive"));
        headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer x"));
        // Every value of a repeated one goes, and the framing header too.
        headers.append(header::TE, HeaderValue::from_static("gzip"));
        headers.append(header::TE, HeaderValue::from_static("deflate"));
        headers.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        headers.append("x-secret-hop", HeaderValue::from_static("2"));
        remove_hop_by_hop(&mut headers);
        assert_eq!(headers.len(), 1, "{headers:?}");
        assert!(headers.contains_key(header::AUTHORIZATION));
    }

    #[test]
    fn te_trailers_alone_crosses() {
        // (the `te` values the client sent, what crosses): only `trailers`, which HTTP/2
        // allows and gRPC servers require, and only ever as exactly `te: trailers`.
        let cases: [(&[&str], Option<&str>); 8] = [
            (&["trailers"], Some("trailers")),
            (&["Trailers"], Some("trailers")),
            (&["gzip, trailers;q=1"], Some("trailers")),
            (&["deflate", " TRAILERS "], Some("trailers")),
            (&["trailers", "trailers"], Some("trailers")),
            (&["gzip"], None),
            (&["gzip;q=0.5, chunked"], None),
            (&["trailersx, x-trailers"], None),
        ];
        for (sent, crossed) in cases {
            let mut headers = HeaderMap::new();
            for value in sent {
                headers.append(header::TE, HeaderValue::from_str(value).unwrap());
            }
            // Named in `Connection`, as an HTTP/1.1 client must: still kept as `trailers`.
            headers.insert(header::CONNECTION, HeaderValue::from_static("TE"));
            remove_hop_by_hop(&mut headers);
            let kept: Vec<&HeaderValue> = headers.get_all(header::TE).iter().collect();
            assert_eq!(
                kept,
                crossed
                    .map(HeaderValue::from_static)
                    .iter()
                    .collect::<Vec<_>>(),
                "{sent:?}"
            );
            assert_eq!(headers.len(), kept.len(), "{sent:?}: {headers:?}");
        }
    }

    #[test]
    fn only_websocket_is_an_upgrade_and_h2c_settings_never_cross() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONNECTION,
            HeaderValue::from_static("Upgrade, HTTP2-Settings"),
        );
        headers.insert(header::UPGRADE, HeaderValue::from_static("H2C"));
        headers.insert(
            "http2-settings",
            HeaderValue::from_static("AAMAAABkAAQAAP__"),
        );
        assert_eq!(upgrade_protocol(&http::Version::HTTP_11, &headers), None);
        headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        assert!(upgrade_protocol(&http::Version::HTTP_11, &headers).is_some());
        for other in ["TLS/1.0", "foo", "websocket, h2c", "h2c, websocket"] {
            headers.insert(header::UPGRADE, HeaderValue::from_static(other));
            assert_eq!(
                upgrade_protocol(&http::Version::HTTP_11, &headers),
                None,
                "{other}"
            );
        }
        // Not named in `Connection`, still removed.
        headers.remove(header::CONNECTION);
        remove_hop_by_hop(&mut headers);
        assert!(headers.is_empty(), "{headers:?}");
    }

    #[test]
    fn ambiguous_framing_is_refused() {
        let mut both = HeaderMap::new();
        both.insert(header::CONTENT_LENGTH, HeaderValue::from_static("5"));
        both.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        assert!(check_framing(&both).is_err());
        let mut two = HeaderMap::new();
        two.append(header::CONTENT_LENGTH, HeaderValue::from_static("5"));
        two.append(header::CONTENT_LENGTH, HeaderValue::from_static("6"));
        assert!(check_framing(&two).is_err());
        let mut one = HeaderMap::new();
        one.insert(header::CONTENT_LENGTH, HeaderValue::from_static("5"));
        assert!(check_framing(&one).is_ok());
        for (coding, ok) in [
            ("chunked", true),
            ("Chunked", true),
            ("gzip, chunked", false),
            ("deflate,chunked", false),
        ] {
            let mut coded = HeaderMap::new();
            coded.insert(header::TRANSFER_ENCODING, HeaderValue::from_static(coding));
            assert_eq!(check_framing(&coded).is_ok(), ok, "{coding}");
        }
    }

    #[test]
    fn heads_over_the_limit_are_refused() {
        let uri: http::Uri = "/path".parse().unwrap();
        let mut headers = HeaderMap::new();
        headers.insert("x-big", HeaderValue::from_str(&"a".repeat(1000)).unwrap());
        assert!(check_head_size(&uri, &headers, 2000).is_ok());
        let refused = check_head_size(&uri, &headers, 1000).unwrap_err();
        assert_eq!(
            refused.status,
            http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
        );
    }
}
