//! Upstream misbehaviour, from a raw TLS upstream: responses out of turn (two to one
//! request, one to none, one smuggled behind chunks), a body that stalls, and 1xx, range,
//! header and trailer answers that carry the value back toward the client.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use sluice_integration_tests::raw::status_of;
use sluice_integration_tests::raw_upstream::{RawUpstream, Script, now, ok};
use sluice_integration_tests::{TestPki, TestProxy};

use crate::{HOSTS, POLICY, VALUE, placeholder, raw_exchange};

/// A request on a fresh tunnel to the raw upstream; the whole raw answer.
async fn get_raw(proxy: &TestProxy, upstream: &RawUpstream, path: &str) -> String {
    let port = upstream.port;
    let raw = format!("GET {path} HTTP/1.1\r\nHost: api.test:{port}\r\nConnection: close\r\n\r\n");
    raw_exchange(proxy, "api.test", port, raw.as_bytes()).await
}

#[tokio::test]
async fn upstream_responses_out_of_turn_are_never_paired_with_the_next_request() {
    let pki = TestPki::new();
    let proxy = TestProxy::start(POLICY, &pki, HOSTS).await;
    // Two responses in one write, to one request.
    fn two_at_once(n: usize) -> Vec<(Duration, Vec<u8>)> {
        let mut bytes = ok("first");
        if n == 0 {
            bytes.extend_from_slice(
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\nINJECTED {VALUE}",
                    9 + VALUE.len()
                )
                .as_bytes(),
            );
            now(bytes)
        } else {
            now(ok("second"))
        }
    }
    // A response nobody asked for, sent once the connection idles in the pool.
    fn unasked(n: usize) -> Vec<(Duration, Vec<u8>)> {
        if n == 0 {
            let extra = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nX-Leak: {VALUE}\r\n\r\nINJECTED {VALUE}",
                9 + VALUE.len()
            );
            vec![
                (Duration::ZERO, ok("first")),
                (Duration::from_millis(300), extra.into_bytes()),
            ]
        } else {
            now(ok("second"))
        }
    }
    // Content-Length and Transfer-Encoding together, a response smuggled behind the chunks.
    fn length_and_chunks(n: usize) -> Vec<(Duration, Vec<u8>)> {
        if n == 0 {
            let chunk = format!("first {VALUE}");
            now(format!(
                "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{chunk}\r\n0\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nINJECTED",
                chunk.len()
            ))
        } else {
            now(ok("second"))
        }
    }
    for (what, script) in [
        ("two responses to one request", two_at_once as Script),
        ("a response to no request", unasked as Script),
        (
            "Content-Length with Transfer-Encoding",
            length_and_chunks as Script,
        ),
    ] {
        let upstream = RawUpstream::start(&pki, script).await;
        let first = get_raw(&proxy, &upstream, "/first").await;
        assert_eq!(status_of(&first), 200, "{what}: {first}");
        assert!(first.contains("first"), "{what}: {first}");
        assert!(!first.contains(VALUE), "{what}: {first}");
        assert!(!first.contains("INJECTED"), "{what}: {first}");
        upstream.wait_closed(1, what).await;
        let second = get_raw(&proxy, &upstream, "/second").await;
        assert_eq!(status_of(&second), 200, "{what}: {second}");
        // The whole body is the second response's own (a small one keeps its length).
        assert!(
            second
                .to_ascii_lowercase()
                .contains("content-length: 6\r\n")
                && second.ends_with("\r\n\r\nsecond"),
            "{what}: {second}"
        );
        assert!(!second.contains("INJECTED"), "{what}: {second}");
        assert_eq!(upstream.heads().len(), 2, "{what}");
    }
    let audit = proxy.stop().await.join("\n");
    assert!(!audit.contains(VALUE));
}

#[tokio::test]
async fn a_small_response_body_that_stalls_gets_504() {
    let pki = TestPki::new();
    let proxy = TestProxy::start_with(POLICY, &pki, HOSTS, |config| {
        config.timeouts.response = Duration::from_secs(1);
    })
    .await;
    // A small body sluice holds whole to redact: its head and 7 of 100 bytes, then nothing
    // for longer than the test waits.
    fn stalls(_: usize) -> Vec<(Duration, Vec<u8>)> {
        vec![
            (
                Duration::ZERO,
                format!("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial {VALUE}")
                    .into_bytes(),
            ),
            (Duration::from_secs(60), b"never".to_vec()),
        ]
    }
    let upstream = RawUpstream::start(&pki, stalls).await;
    let answer = get_raw(&proxy, &upstream, "/stall").await;
    assert_eq!(status_of(&answer), 504, "{answer}");
    assert!(
        answer.contains("sluice-error: upstream-timeout"),
        "{answer}"
    );
    assert!(
        !answer.contains(VALUE) && !answer.contains("partial"),
        "{answer}"
    );
    let audit = proxy.stop().await.join("\n");
    assert!(audit.contains("upstream-timeout"), "not audited");
    assert!(!audit.contains(VALUE));
}

/// How an answer from [`RawUpstream`] must look: the raw bytes the client got, the heads
/// the upstream received, and the placeholder.
type AnswerCheck = fn(&str, &[String], &str);

#[tokio::test]
async fn upstream_1xx_ranges_headers_and_trailers_carry_no_value_to_the_client() {
    let pki = TestPki::new();
    let proxy = TestProxy::start(POLICY, &pki, HOSTS).await;
    let ph = placeholder(&proxy);
    fn informational(_: usize) -> Vec<(Duration, Vec<u8>)> {
        now(format!(
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s?t={VALUE}>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nX-Leak: {VALUE}\r\nContent-Length: {}\r\n\r\nbody {VALUE}",
            5 + VALUE.len()
        ))
    }
    fn final_only_and_redacted(answer: &str, _: &[String], ph: &str) {
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        assert_eq!(answer.matches("HTTP/1.1 ").count(), 1, "{answer}");
        assert!(!answer.to_ascii_lowercase().contains("link:"), "{answer}");
        assert!(answer.contains(&format!("x-leak: {ph}\r\n")), "{answer}");
        assert!(answer.contains(&format!("body {ph}")), "{answer}");
    }
    fn range(_: usize) -> Vec<(Duration, Vec<u8>)> {
        let body = format!("[{VALUE}]");
        now(format!(
            "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 100-{}/4096\r\nContent-Length: {}\r\n\r\n{body}",
            100 + body.len() - 1,
            body.len()
        ))
    }
    fn range_redacted(answer: &str, heads: &[String], ph: &str) {
        assert!(heads[0].contains("range: bytes=100-200\r\n"), "{heads:?}");
        assert!(
            answer.starts_with("HTTP/1.1 206 Partial Content\r\n"),
            "{answer}"
        );
        assert!(answer.contains("content-range: bytes 100-"), "{answer}");
        assert!(answer.contains(&format!("[{ph}]")), "{answer}");
    }
    fn headers(_: usize) -> Vec<(Duration, Vec<u8>)> {
        now(format!(
            "HTTP/1.1 200 {VALUE}\r\nX-Leak: {VALUE}\r\nWWW-Authenticate: Bearer realm=\"{VALUE}\"\r\nSet-Cookie: a={VALUE}\r\nSet-Cookie: b={VALUE}; Secure\r\nLocation: https://elsewhere.test/?t={VALUE}\r\nX-{VALUE}: named\r\nContent-Length: 2\r\n\r\nok"
        ))
    }
    fn every_header_redacted(answer: &str, _: &[String], ph: &str) {
        // The reason phrase is the canonical one, not the upstream's.
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        for line in [
            format!("x-leak: {ph}"),
            format!("www-authenticate: Bearer realm=\"{ph}\""),
            format!("set-cookie: a={ph}"),
            format!("set-cookie: b={ph}; Secure"),
            format!("location: https://elsewhere.test/?t={ph}"),
        ] {
            assert!(answer.contains(&format!("{line}\r\n")), "{line}: {answer}");
        }
        // A header named after the value is dropped.
        assert!(!answer.contains(": named"), "{answer}");
    }
    fn h2c_accepted(_: usize) -> Vec<(Duration, Vec<u8>)> {
        now(format!(
            "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\nUNINSPECTED {VALUE}"
        ))
    }
    fn no_h2c_upgrade(answer: &str, heads: &[String], _: &str) {
        let head = heads[0].to_ascii_lowercase();
        assert!(
            !head.contains("upgrade") && !head.contains("http2-settings"),
            "{head}"
        );
        assert!(!answer.contains("UNINSPECTED"), "{answer}");
    }
    let cases: [(&str, Script, &str, AnswerCheck); 4] = [
        (
            "1xx before the final response",
            informational,
            "",
            final_only_and_redacted,
        ),
        (
            "a 206 range response",
            range,
            "Range: bytes=100-200\r\n",
            range_redacted,
        ),
        (
            "a value in every kind of header",
            headers,
            "",
            every_header_redacted,
        ),
        (
            "an upstream accepting h2c",
            h2c_accepted,
            "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\nConnection: Upgrade, HTTP2-Settings, close\r\n",
            no_h2c_upgrade,
        ),
    ];
    for (what, script, request_extra, check) in cases {
        let upstream = RawUpstream::start(&pki, script).await;
        let port = upstream.port;
        let raw = format!(
            "GET /x HTTP/1.1\r\nHost: api.test:{port}\r\n{request_extra}Connection: close\r\n\r\n"
        );
        let answer = raw_exchange(&proxy, "api.test", port, raw.as_bytes()).await;
        assert!(!answer.contains(VALUE), "{what}: {answer}");
        let heads = upstream.heads();
        assert_eq!(heads.len(), 1, "{what}: {heads:?}");
        check(&answer, &heads, &ph);
    }

    // Trailers, over HTTP/2 to the client (HTTP/1.1 clients get none without `TE: trailers`).
    fn trailers(_: usize) -> Vec<(Duration, Vec<u8>)> {
        let chunk = format!("body {VALUE}");
        now(format!(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: x-digest\r\n\r\n{:x}\r\n{chunk}\r\n0\r\nx-digest: {VALUE}\r\nx-{VALUE}: named\r\n\r\n",
            chunk.len()
        ))
    }
    let upstream = RawUpstream::start(&pki, trailers).await;
    let port = upstream.port;
    let tls = proxy
        .at()
        .tunnel_to("api.test", port, &[b"h2"])
        .await
        .expect("tunnel");
    let (mut send, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tls),
    )
    .await
    .expect("h2 handshake");
    tokio::spawn(connection);
    let request = http::Request::get(format!("https://api.test:{port}/trailers"))
        .body(Full::new(Bytes::new()))
        .expect("request");
    let response = send.send_request(request).await.expect("response");
    assert_eq!(response.status(), 200);
    let collected = http_body_util::BodyExt::collect(response.into_body())
        .await
        .expect("body");
    let trailers = collected.trailers().cloned().unwrap_or_default();
    let body = collected.to_bytes();
    assert_eq!(body, format!("body {ph}").as_bytes());
    // Trailer values are redacted; a trailer named after the value is renamed.
    let shown = format!("{trailers:?}");
    assert!(!shown.contains(VALUE), "{shown}");
    assert_eq!(trailers["x-digest"], ph.as_str(), "{shown}");

    let audit = proxy.stop().await.join("\n");
    assert!(!audit.contains(VALUE));
    assert!(
        audit.contains("\"event\":\"redact\""),
        "redactions not audited"
    );
}

/// The body of a raw HTTP/1.1 answer, its chunks joined when it is chunked.
fn answer_body(answer: &str) -> Vec<u8> {
    let (head, mut rest) = answer.split_once("\r\n\r\n").unwrap_or((answer, ""));
    if !head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return rest.as_bytes().to_vec();
    }
    let mut body = Vec::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 || after.len() < size {
            break;
        }
        body.extend_from_slice(&after.as_bytes()[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    body
}

fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

fn chunked(data: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n0\r\n\r\n");
    out
}

#[tokio::test]
async fn a_transfer_coding_is_decoded_and_redacted_or_refused_never_passed_on_coded() {
    let pki = TestPki::new();
    let proxy = TestProxy::start(POLICY, &pki, HOSTS).await;
    let placeholder = placeholder(&proxy);
    let secret_body = || format!("token={VALUE}").into_bytes();
    fn gzip_then_chunked(_: usize) -> Vec<(Duration, Vec<u8>)> {
        let mut bytes = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n".to_vec();
        bytes.extend(chunked(&gzip(format!("token={VALUE}").as_bytes())));
        now(bytes)
    }
    fn deflate_then_chunked(_: usize) -> Vec<(Duration, Vec<u8>)> {
        use std::io::Write as _;
        let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        zlib.write_all(format!("token={VALUE}").as_bytes()).unwrap();
        let mut bytes = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: deflate, chunked\r\n\r\n".to_vec();
        bytes.extend(chunked(&zlib.finish().unwrap()));
        now(bytes)
    }
    fn gzip_to_the_close(_: usize) -> Vec<(Duration, Vec<u8>)> {
        let mut bytes =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nConnection: close\r\n\r\n".to_vec();
        bytes.extend(gzip(format!("token={VALUE}").as_bytes()));
        now(bytes)
    }
    for (what, script) in [
        ("gzip, chunked", gzip_then_chunked as Script),
        ("deflate, chunked", deflate_then_chunked as Script),
        ("gzip to the close", gzip_to_the_close as Script),
    ] {
        let upstream = RawUpstream::start(&pki, script).await;
        let answer = get_raw(&proxy, &upstream, "/coded").await;
        assert_eq!(status_of(&answer), 200, "{what}: {answer}");
        // Decoded, so the guard could read it, and redacted: the client reads the
        // placeholder in the clear, and no coding is left for it to undo.
        let body = answer_body(&answer);
        assert_eq!(
            body,
            format!("token={placeholder}").into_bytes(),
            "{what}: {answer}"
        );
        assert_ne!(body, secret_body(), "{what}");
        let head = answer
            .split("\r\n\r\n")
            .next()
            .unwrap()
            .to_ascii_lowercase();
        assert!(
            !head.contains("gzip") && !head.contains("deflate"),
            "{what}: {head}"
        );
    }
    // Chunks inside a coding: sluice does not undo that, so the answer is refused.
    fn chunked_then_gzip(_: usize) -> Vec<(Duration, Vec<u8>)> {
        let mut bytes =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\nConnection: close\r\n\r\n"
                .to_vec();
        bytes.extend(gzip(&chunked(format!("token={VALUE}").as_bytes())));
        now(bytes)
    }
    let upstream = RawUpstream::start(&pki, chunked_then_gzip).await;
    let answer = get_raw(&proxy, &upstream, "/coded").await;
    assert_eq!(status_of(&answer), 502, "{answer}");
    assert!(
        answer.contains("sluice-error: upstream-encoding"),
        "{answer}"
    );
}
