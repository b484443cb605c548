//! Framing inside a tunnel, over raw HTTP/1.1 bytes: folded lines, bare LF and CR, NUL,
//! whitespace before the colon, absolute-, asterisk- and authority-form targets, a CONNECT
//! inside the tunnel and h2c upgrades. Each is refused, or normalised with no value toward a
//! host the secret does not grant.

use sluice_integration_tests::raw::status_of;
use sluice_integration_tests::{RecordingUpstream, TestPki, TestProxy};

use crate::{HOSTS, POLICY, VALUE, assert_still_serves, placeholder, raw_exchange, recorded_text};

/// What one odd request head must come to.
enum Expect {
    /// A 4xx answer, and nothing at the upstream.
    Refused,
    /// Either a 4xx answer and nothing at the upstream, or one well-formed request there,
    /// which `check` inspects.
    RefusedOrNormalised(fn(&sluice_integration_tests::Recorded, &str)),
}

/// A normalised request carries no bare CR, LF or NUL anywhere in its head.
fn clean_head(record: &sluice_integration_tests::Recorded, _placeholder: &str) {
    for (name, value) in &record.headers {
        assert!(
            !value
                .as_bytes()
                .iter()
                .any(|b| matches!(b, b'\r' | b'\n' | 0)),
            "{name}: {value:?}"
        );
    }
}

/// Normalised, with the placeholder swapped for the value in `Authorization` only.
fn swapped_in_authorization(record: &sluice_integration_tests::Recorded, placeholder: &str) {
    clean_head(record, placeholder);
    assert_eq!(record.headers["authorization"], format!("Bearer {VALUE}"));
}

/// Normalised, and nothing of an upgrade left in it.
fn no_upgrade(record: &sluice_integration_tests::Recorded, placeholder: &str) {
    clean_head(record, placeholder);
    for name in ["upgrade", "http2-settings", "connection"] {
        assert!(!record.headers.contains_key(name), "{name}: {record:?}");
    }
}

/// The tunnel's host, a name for the case, the raw request (`AUTH` and `PH` replaced by
/// the tunnel's authority and the placeholder), and what it must come to. Each case asks
/// for a path of its own, so that the upstream's records tell the cases apart.
type FramingCase = (&'static str, &'static str, &'static str, Expect);

fn framing_cases() -> Vec<FramingCase> {
    use Expect::*;
    vec![
        // Obsolete line folding (RFC 9112 §5.2): a placeholder hidden in the continuation.
        (
            "other.test",
            "folded placeholder toward an ungranted host",
            "GET /fold-1 HTTP/1.1\r\nHost: AUTH\r\nX-Note: hello\r\n PH\r\nConnection: close\r\n\r\n",
            Refused,
        ),
        (
            "api.test",
            "folded Authorization toward the granted host",
            "GET /fold-2 HTTP/1.1\r\nHost: AUTH\r\nAuthorization: Bearer\r\n PH\r\nConnection: close\r\n\r\n",
            Refused,
        ),
        (
            "api.test",
            "folded Host naming another host",
            "GET /fold-3 HTTP/1.1\r\nHost: AUTH\r\n\tother.test\r\nConnection: close\r\n\r\n",
            Refused,
        ),
        (
            "api.test",
            "fold as the first header line",
            "GET /fold-4 HTTP/1.1\r\n Authorization: Bearer PH\r\nHost: AUTH\r\nConnection: close\r\n\r\n",
            Refused,
        ),
        // Bare LF line endings: read as line ends, re-framed by sluice.
        (
            "api.test",
            "bare LF everywhere",
            "GET /lf-1 HTTP/1.1\nHost: AUTH\nAuthorization: Bearer PH\nConnection: close\n\n",
            RefusedOrNormalised(swapped_in_authorization),
        ),
        (
            "other.test",
            "bare LF hiding a placeholder header toward an ungranted host",
            "GET /lf-2 HTTP/1.1\r\nHost: AUTH\r\nX-A: b\nX-Token: PH\r\nConnection: close\r\n\r\n",
            Refused,
        ),
        (
            "api.test",
            "bare LF hiding a Content-Length",
            "POST /lf-3 HTTP/1.1\r\nHost: AUTH\r\nX-A: b\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
            RefusedOrNormalised(clean_head),
        ),
        // NUL and bare CR in names and values.
        (
            "api.test",
            "NUL in a value",
            "GET /nul-1 HTTP/1.1\r\nHost: AUTH\r\nAuthorization: Bearer PH\0x\r\nConnection: close\r\n\r\n",
            Refused,
        ),
        (
            "api.test",
            "NUL in a name",
            "GET /nul-2 HTTP/1.1\r\nHost: AUTH\r\nX-\0Token: PH\r\nConnection: close\r\n\r\n",
            Refused,
        ),
        (
            "api.test",
            "bare CR in a value",
            "GET /cr-1 HTTP/1.1\r\nHost: AUTH\r\nAuthorization: Bearer PH\rX-Evil: 1\r\nConnection: close\r\n\r\n",
            Refused,
        ),
        (
            "other.test",
            "bare CR in a name",
            "GET /cr-2 HTTP/1.1\r\nHost: AUTH\r\nX-\rToken: PH\r\nConnection: close\r\n\r\n",
            Refused,
        ),
        (
            "other.test",
            "the value as a header name toward an ungranted host",
            "GET /name-1 HTTP/1.1\r\nHost: AUTH\r\nX-VALUE: 1\r\nConnection: close\r\n\r\n",
            Refused,
        ),
        // Whitespace between the name and the colon (RFC 9112 §5.1: must be rejected).
        (
            "api.test",
            "space before the colon of Host",
            "GET /ws-1 HTTP/1.1\r\nHost : other.test\r\nHost: AUTH\r\nConnection: close\r\n\r\n",
            Refused,
        ),
        (
            "other.test",
            "space before the colon of a placeholder header",
            "GET /ws-2 HTTP/1.1\r\nHost: AUTH\r\nAuthorization : Bearer PH\r\nConnection: close\r\n\r\n",
            Refused,
        ),
        (
            "api.test",
            "tab before the colon of Content-Length",
            "POST /ws-3 HTTP/1.1\r\nHost: AUTH\r\nContent-Length\t: 3\r\nConnection: close\r\n\r\nabc",
            Refused,
        ),
        // Absolute-form and asterisk-form targets.
        (
            "api.test",
            "absolute-form naming another host",
            "GET https://other.test/abs-1 HTTP/1.1\r\nHost: AUTH\r\nAuthorization: Bearer PH\r\nConnection: close\r\n\r\n",
            Refused,
        ),
        (
            "api.test",
            "absolute-form over http inside TLS",
            "GET http://AUTH/abs-2 HTTP/1.1\r\nHost: AUTH\r\nConnection: close\r\n\r\n",
            Refused,
        ),
        (
            "api.test",
            "absolute-form with the placeholder as userinfo",
            "GET https://PH@AUTH/abs-3 HTTP/1.1\r\nHost: AUTH\r\nConnection: close\r\n\r\n",
            Refused,
        ),
        (
            "api.test",
            "absolute-form with the granted host as userinfo",
            "GET https://AUTH@other.test/abs-4 HTTP/1.1\r\nHost: AUTH\r\nAuthorization: Bearer PH\r\nConnection: close\r\n\r\n",
            Refused,
        ),
        (
            "api.test",
            "absolute-form in upper case",
            "GET HTTPS://API.TEST:PORT/abs-5 HTTP/1.1\r\nHost: AUTH\r\nAuthorization: Bearer PH\r\nConnection: close\r\n\r\n",
            RefusedOrNormalised(swapped_in_authorization),
        ),
        (
            "api.test",
            "asterisk-form OPTIONS",
            "OPTIONS * HTTP/1.1\r\nHost: AUTH\r\nConnection: close\r\n\r\n",
            RefusedOrNormalised(clean_head),
        ),
        (
            "api.test",
            "asterisk-form GET",
            "GET * HTTP/1.1\r\nHost: AUTH\r\nConnection: close\r\n\r\n",
            RefusedOrNormalised(clean_head),
        ),
        (
            "api.test",
            "authority-form GET",
            "GET other.test:443 HTTP/1.1\r\nHost: AUTH\r\nConnection: close\r\n\r\n",
            Refused,
        ),
        // A CONNECT inside an intercepted tunnel: no tunnel in a tunnel.
        (
            "api.test",
            "nested CONNECT to another host",
            "CONNECT other.test:443 HTTP/1.1\r\nHost: other.test:443\r\nConnection: close\r\n\r\n",
            Refused,
        ),
        // h2c: cleartext HTTP/2, undefined inside TLS; never an upgrade through sluice.
        (
            "api.test",
            "h2c upgrade with HTTP2-Settings",
            "GET /h2c-1 HTTP/1.1\r\nHost: AUTH\r\nConnection: Upgrade, HTTP2-Settings, close\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n",
            RefusedOrNormalised(no_upgrade),
        ),
        (
            "api.test",
            "h2c upgrade, settings not named in Connection",
            "GET /h2c-2 HTTP/1.1\r\nHost: AUTH\r\nUpgrade: H2C\r\nConnection: upgrade, close\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n\r\n",
            RefusedOrNormalised(no_upgrade),
        ),
        (
            "api.test",
            "nested CONNECT to the tunnel's own host",
            "CONNECT AUTH HTTP/1.1\r\nHost: AUTH\r\nAuthorization: Bearer PH\r\nConnection: close\r\n\r\n",
            Refused,
        ),
    ]
}

#[tokio::test]
async fn odd_http1_framing_inside_a_tunnel_is_refused_or_normalised() {
    let pki = TestPki::new();
    let upstream = RecordingUpstream::start(&pki, HOSTS, &[b"http/1.1"]).await;
    let proxy = TestProxy::start(POLICY, &pki, HOSTS).await;
    let port = upstream.port();
    let ph = placeholder(&proxy);
    for (host, name, raw, expect) in framing_cases() {
        let before = upstream.records().len();
        let raw = raw
            .replace("AUTH", &format!("{host}:{port}"))
            .replace("PORT", &port.to_string())
            .replace("PH", &ph)
            .replace("VALUE", VALUE);
        let answer = raw_exchange(&proxy, host, port, raw.as_bytes()).await;
        let status = status_of(&answer);
        let arrived: Vec<_> = upstream.records().into_iter().skip(before).collect();
        assert!(
            !answer.contains(VALUE),
            "{name}: the value came back: {answer}"
        );
        match expect {
            Expect::Refused => {
                assert!((400..500).contains(&status), "{name}: {answer}");
                assert!(
                    arrived.is_empty(),
                    "{name}: reached the upstream: {arrived:?}"
                );
            }
            Expect::RefusedOrNormalised(check) => {
                if (400..500).contains(&status) {
                    assert!(
                        arrived.is_empty(),
                        "{name}: reached the upstream: {arrived:?}"
                    );
                } else {
                    assert_eq!(status, 200, "{name}: {answer}");
                    assert_eq!(arrived.len(), 1, "{name}: {arrived:?}");
                    check(&arrived[0], &ph);
                }
            }
        }
        // The value never goes toward a host the secret does not grant, in any form.
        for record in &arrived {
            if !record.headers["host"].as_bytes().starts_with(b"api.test") {
                assert!(!recorded_text(record).contains(VALUE), "{name}: {record:?}");
            }
        }
    }
    assert_still_serves(&proxy, port).await;
    let audit = proxy.stop().await.join("\n");
    assert!(!audit.contains(VALUE));
}
