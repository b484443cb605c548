//! HTTP/2 abuse on the intercepted tunnel, in raw frames: malformed request heads that must
//! never reach the upstream, and floods (PING, CONTINUATION, an HPACK bomb, an oversize
//! header block, rapid reset) that must leave the service up and its memory bounded.

use std::time::Duration;

use bytes::Bytes;
use sluice_integration_tests::h2frame as frame;
use sluice_integration_tests::h2wire::H2Wire;
use sluice_integration_tests::{RecordingUpstream, TestPki, TestProxy};

use crate::serve_process::{RSS_GROWTH_LIMIT_KIB, ServeProcess};
use crate::{HOSTS, POLICY, VALUE, assert_still_serves_at, placeholder, recorded_text};

/// Everything the upstream received was a well-formed request for one of `paths`.
fn assert_only_paths(upstream: &RecordingUpstream, paths: &[&str]) {
    for record in upstream.records() {
        assert!(
            paths.contains(&record.uri.path()),
            "unexpected request at the upstream: {record:?}"
        );
        for name in [
            "connection",
            "transfer-encoding",
            "upgrade",
            "keep-alive",
            "te",
        ] {
            assert!(!record.headers.contains_key(name), "{name}: {record:?}");
        }
        assert!(!recorded_text(&record).contains('\0'));
    }
}

/// A header list as written on the wire, in order, malformed or not.
type Fields = Vec<(String, String)>;

#[tokio::test]
async fn http2_malformed_heads_never_reach_the_upstream() {
    let pki = TestPki::new();
    let upstream = RecordingUpstream::start(&pki, HOSTS, &[b"h2", b"http/1.1"]).await;
    let proxy = TestProxy::start(POLICY, &pki, HOSTS).await;
    let at = proxy.at();
    let port = upstream.port();
    let ph = placeholder(&proxy);
    let auth = format!("api.test:{port}");
    let bearer = format!("Bearer {ph}");
    let f = |fields: &[(&str, &str)]| -> Fields {
        fields
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    };
    let cases: Vec<(&str, Fields, Option<&[u8]>)> = vec![
        (
            "missing :path",
            f(&[
                (":method", "GET"),
                (":scheme", "https"),
                (":authority", &auth),
            ]),
            None,
        ),
        (
            "duplicate :authority",
            f(&[
                (":method", "GET"),
                (":scheme", "https"),
                (":path", "/h2-dup"),
                (":authority", &auth),
                (":authority", "other.test"),
                ("authorization", &bearer),
            ]),
            None,
        ),
        (
            ":authority for another host",
            f(&[
                (":method", "GET"),
                (":scheme", "https"),
                (":path", "/h2-other"),
                (":authority", &format!("other.test:{port}")),
                ("authorization", &bearer),
            ]),
            None,
        ),
        (
            "host header for another host",
            f(&[
                (":method", "GET"),
                (":scheme", "https"),
                (":path", "/h2-host"),
                (":authority", &auth),
                ("host", &format!("other.test:{port}")),
                ("authorization", &bearer),
            ]),
            None,
        ),
        (
            "uppercase header name",
            f(&[
                (":method", "GET"),
                (":scheme", "https"),
                (":path", "/h2-upper"),
                (":authority", &auth),
                ("Authorization", &bearer),
            ]),
            None,
        ),
        (
            "connection header",
            f(&[
                (":method", "GET"),
                (":scheme", "https"),
                (":path", "/h2-conn"),
                (":authority", &auth),
                ("connection", "keep-alive"),
            ]),
            None,
        ),
        (
            "transfer-encoding header",
            f(&[
                (":method", "POST"),
                (":scheme", "https"),
                (":path", "/h2-te"),
                (":authority", &auth),
                ("transfer-encoding", "chunked"),
            ]),
            Some(b"5\r\nhello\r\n0\r\n\r\n"),
        ),
        (
            "te other than trailers",
            f(&[
                (":method", "GET"),
                (":scheme", "https"),
                (":path", "/h2-te-gzip"),
                (":authority", &auth),
                ("te", "gzip"),
            ]),
            None,
        ),
        (
            "upgrade header",
            f(&[
                (":method", "GET"),
                (":scheme", "https"),
                (":path", "/h2-upgrade"),
                (":authority", &auth),
                ("upgrade", "h2c"),
            ]),
            None,
        ),
        (
            "pseudo-header after a regular one",
            f(&[
                (":method", "GET"),
                (":scheme", "https"),
                ("authorization", &bearer),
                (":path", "/h2-late"),
                (":authority", &auth),
            ]),
            None,
        ),
        (
            "unknown pseudo-header",
            f(&[
                (":method", "GET"),
                (":scheme", "https"),
                (":path", "/h2-unknown"),
                (":authority", &auth),
                (":smuggle", "x"),
            ]),
            None,
        ),
        (
            "CONNECT inside the tunnel",
            f(&[(":method", "CONNECT"), (":authority", &auth)]),
            None,
        ),
        (
            // RFC 8441 is served for WebSocket only (tests/websocket.rs): another
            // protocol would be a tunnel sluice cannot read.
            "extended CONNECT (:protocol connect-udp)",
            f(&[
                (":method", "CONNECT"),
                (":protocol", "connect-udp"),
                (":scheme", "https"),
                (":path", "/ws"),
                (":authority", &auth),
                ("sec-websocket-version", "13"),
                ("authorization", &bearer),
            ]),
            None,
        ),
        (
            "content-length shorter than the data",
            f(&[
                (":method", "POST"),
                (":scheme", "https"),
                (":path", "/h2-length"),
                (":authority", &auth),
                ("content-length", "3"),
            ]),
            Some(ph.as_bytes()),
        ),
    ];
    for (what, fields, body) in cases {
        let mut wire = H2Wire::open(&at, port).await;
        wire.request(1, &fields, body).await;
        wire.wait_for(|seen| {
            seen.status(1).is_some() || seen.was_reset(1) || seen.goaway.is_some()
        })
        .await;
        let (status, reset, goaway) =
            wire.seen(|seen| (seen.status(1), seen.was_reset(1), seen.goaway));
        assert!(
            status.is_some_and(|s| (400..500).contains(&s))
                || (status.is_none() && (reset || goaway.is_some())),
            "{what}: status {status:?}, reset {reset}, goaway {goaway:?}"
        );
        // sluice offers extended CONNECT (SETTINGS_ENABLE_CONNECT_PROTOCOL, 0x8) for
        // WebSocket.
        let settings = wire.seen(|seen| seen.settings.clone());
        assert!(settings.contains(&(0x8, 1)), "{what}: {settings:?}");
        // The same connection still serves, unless the proxy ended it.
        if goaway.is_none() {
            assert_eq!(wire.probe(3).await, Some(200), "{what}");
        }
        assert!(!wire.seen(|seen| {
            seen.data
                .windows(VALUE.len())
                .any(|w| w == VALUE.as_bytes())
        }));
    }
    assert_only_paths(&upstream, &["/probe"]);
    assert_still_serves_at(&at, port).await;
    let audit = proxy.stop().await.join("\n");
    assert!(!audit.contains(VALUE));
}

#[tokio::test]
async fn http2_floods_leave_the_service_up_and_memory_bounded() {
    let pki = TestPki::new();
    let upstream = RecordingUpstream::start(&pki, HOSTS, &[b"h2", b"http/1.1"]).await;
    let mut serve = ServeProcess::start(POLICY, &pki, "").await;
    let at = serve.at.clone();
    let port = upstream.port();
    // Warm up (leaf minted, pools filled), then take the baseline.
    assert_still_serves_at(&at, port).await;
    let baseline = serve.rss_kib();

    // PING flood: every PING asks for a PONG; a client that sends 20 000 of them gets them
    // answered (or the connection closed), and its own stream still served.
    let mut wire = H2Wire::open(&at, port).await;
    let pings: Vec<u8> = (0..20_000u64)
        .flat_map(|n| frame::encode(frame::PING, 0, 0, &n.to_be_bytes()))
        .collect();
    wire.send(&pings).await;
    let probed = wire.probe(1).await;
    assert!(
        probed == Some(200) || wire.seen(|s| s.goaway.is_some()),
        "ping flood: {probed:?}"
    );

    // CONTINUATION flood: a header block that never ends.
    let mut wire = H2Wire::open(&at, port).await;
    let fields = wire.request_fields("/continuation", &[]);
    let mut block = wire.block(&fields);
    // A literal header whose value claims 1 GiB: the frames below are its bytes.
    block.push(0x00);
    block.push(0x01);
    block.push(b'x');
    block.extend(loona_hpack::encoder::encode_integer(1 << 30, 7));
    let mut flood = frame::encode(frame::HEADERS, 0, 1, &block);
    let filler = vec![b'a'; 1024];
    for _ in 0..20_000 {
        flood.extend(frame::encode(frame::CONTINUATION, 0, 1, &filler));
    }
    wire.send(&flood).await;
    wire.wait_for(|s| s.goaway.is_some()).await;
    assert!(
        wire.seen(|s| s.goaway.is_some() || s.closed),
        "the CONTINUATION flood was not cut off"
    );

    // HPACK bomb: one 4 KiB field put in the dynamic table, then referenced by one-byte
    // indexes: a 20 KiB block that decodes to 40 MiB.
    let mut wire = H2Wire::open(&at, port).await;
    let mut fields = wire.request_fields("/hpack-bomb", &[]);
    let big = "b".repeat(4000);
    fields.extend((0..10_000).map(|_| ("x-bomb".to_owned(), big.clone())));
    let block = wire.block(&fields);
    assert!(
        block.len() < 16_384,
        "the bomb fits one frame: {}",
        block.len()
    );
    wire.send(&frame::encode(
        frame::HEADERS,
        frame::END_HEADERS | frame::END_STREAM,
        1,
        &block,
    ))
    .await;
    wire.wait_for(|s| s.status(1).is_some() || s.was_reset(1) || s.goaway.is_some())
        .await;
    let bomb = wire.seen(|s| (s.status(1), s.was_reset(1), s.goaway));
    assert!(
        bomb.0 == Some(431) || (bomb.0.is_none() && (bomb.1 || bomb.2.is_some())),
        "hpack bomb: {bomb:?}"
    );
    if bomb.2.is_none() {
        assert_eq!(wire.probe(3).await, Some(200), "after the HPACK bomb");
    }

    // An oversize header block over HEADERS and CONTINUATION frames: 256 KiB of literals.
    let mut wire = H2Wire::open(&at, port).await;
    let mut fields = wire.request_fields("/oversize", &[]);
    fields.extend((0..64).map(|n| (format!("x-big-{n}"), "c".repeat(4000))));
    let block = wire.block(&fields);
    let mut frames = Vec::new();
    let pieces: Vec<&[u8]> = block.chunks(16_000).collect();
    for (n, piece) in pieces.iter().enumerate() {
        let last = n + 1 == pieces.len();
        let kind = if n == 0 {
            frame::HEADERS
        } else {
            frame::CONTINUATION
        };
        let mut flags = if last { frame::END_HEADERS } else { 0 };
        if n == 0 {
            flags |= frame::END_STREAM;
        }
        frames.extend(frame::encode(kind, flags, 1, piece));
    }
    wire.send(&frames).await;
    wire.wait_for(|s| s.status(1).is_some() || s.was_reset(1) || s.goaway.is_some())
        .await;
    let oversize = wire.seen(|s| (s.status(1), s.was_reset(1), s.goaway));
    assert!(
        oversize.0 == Some(431) || (oversize.0.is_none() && (oversize.1 || oversize.2.is_some())),
        "oversize block: {oversize:?}"
    );

    // Rapid reset (CVE-2023-44487): thousands of requests, each cancelled as soon as sent,
    // through a real HTTP/2 client.
    let tls = at
        .tunnel_to("api.test", port, &[b"h2"])
        .await
        .expect("tunnel");
    let (mut h2, connection) = h2::client::handshake(tls).await.expect("h2 handshake");
    let driver = tokio::spawn(connection);
    let sent = rapid_reset(&mut h2, port, 5_000).await;
    drop(h2);
    let _ = tokio::time::timeout(Duration::from_secs(20), driver).await;
    let records = upstream.records();
    let reached = records
        .iter()
        .filter(|r| r.uri.path() == "/rapid-reset")
        .count();
    // Cancelled requests may or may not have been forwarded before their reset arrived;
    // what matters is that the attack went out, and the service and memory held (below).
    assert!(sent > 0, "the rapid reset never got a stream out");
    eprintln!("rapid reset: {sent} streams sent and reset, {reached} reached the upstream");

    serve.assert_alive();
    assert_still_serves_at(&at, port).await;
    let grown = serve.rss_kib().saturating_sub(baseline);
    eprintln!("rss: baseline {baseline} KiB, grown {grown} KiB");
    assert!(
        grown < RSS_GROWTH_LIMIT_KIB,
        "the proxy grew by {grown} KiB over the floods"
    );
    assert_only_paths(&upstream, &["/still-serving", "/probe", "/rapid-reset"]);
}

/// Sends up to `count` requests, dropping each one's handles at once (which resets the
/// stream); returns how many went out before the proxy stopped taking them.
async fn rapid_reset(h2: &mut h2::client::SendRequest<Bytes>, port: u16, count: usize) -> usize {
    for sent in 0..count {
        let ready = tokio::time::timeout(Duration::from_secs(20), h2.clone().ready()).await;
        let Ok(Ok(mut ready)) = ready else {
            return sent;
        };
        let request = http::Request::get(format!("https://api.test:{port}/rapid-reset"))
            .body(())
            .expect("request");
        match ready.send_request(request, true) {
            Ok((response, _)) => drop(response),
            Err(_) => return sent,
        }
    }
    count
}
