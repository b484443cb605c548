//! The proxy transport end to end: a real proxy, real TLS upstreams on 127.0.0.1, curl
//! and a Rust client. Each refusal case also checks what the upstream received: nothing.

use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use sluice_integration_tests::client::{self, TunnelClient};
use sluice_integration_tests::{Curl, RecordingUpstream, TestPki, TestProxy};

const POLICY: &str = r#"
version: 1
secrets:
  api_token:
    value: "test-token-value-0001"
    hosts: ["api.test"]
    sinks: [egress]
egress:
  allow: ["other.test"]
  passthrough: ["pass.test"]
  allow_ips: ["127.0.0.1/32"]
"#;

const HOSTS: &[&str] = &["api.test", "other.test", "pass.test", "unlisted.test"];

async fn setup(alpn: &[&[u8]]) -> (TestPki, RecordingUpstream, TestProxy) {
    let pki = TestPki::new();
    let upstream = RecordingUpstream::start(&pki, HOSTS, alpn).await;
    let proxy = TestProxy::start(POLICY, &pki, HOSTS).await;
    (pki, upstream, proxy)
}

async fn curl(proxy: &TestProxy, args: &[&str], url: String) -> client::CurlOutput {
    let proxy_url = proxy.url();
    let ca = proxy.ca_path();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || Curl::new(&proxy_url, &ca).args(args).get(&url))
        .await
        .expect("curl task")
}

/// Whether an audit line is an event of `kind`.
fn is_event(line: &str, kind: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(line)
        .map(|v| v["event"] == kind)
        .unwrap_or(false)
}

fn get(uri: &str) -> Request<Full<Bytes>> {
    Request::get(uri)
        .body(Full::new(Bytes::new()))
        .expect("request")
}

#[tokio::test]
async fn curl_reaches_a_granted_host_over_http1_and_http2() {
    let (_pki, upstream, proxy) = setup(&[b"h2", b"http/1.1"]).await;
    let url = format!("https://api.test:{}/hello", upstream.port());
    let h1 = curl(&proxy, &["--http1.1"], url.clone()).await;
    assert_eq!(h1.status, 200, "{h1:?}");
    assert_eq!(h1.body, "ok");
    let h2 = curl(&proxy, &["--http2", "-v"], url).await;
    assert_eq!(h2.status, 200, "{h2:?}");
    assert!(
        h2.stderr.contains("ALPN: server accepted h2") || h2.stderr.contains("using HTTP/2"),
        "{}",
        h2.stderr
    );
    let records = upstream.records();
    assert_eq!(records.len(), 2);
    for record in &records {
        assert!(!record.headers.contains_key("proxy-authorization"));
        assert_eq!(record.uri.path(), "/hello");
    }
    // The upstream offers h2, but sluice speaks to it what the client spoke to sluice.
    let versions: Vec<_> = records.iter().map(|r| r.version).collect();
    assert_eq!(versions, [http::Version::HTTP_11, http::Version::HTTP_2]);
    let audit = proxy.stop().await;
    assert!(audit.first().is_some_and(|l| is_event(l, "start")));
    assert!(audit.last().is_some_and(|l| is_event(l, "stop")));
}

#[tokio::test]
async fn an_accept_encoding_sluice_can_decode_goes_as_it_came_and_any_other_is_narrowed() {
    let (_pki, upstream, proxy) = setup(&[b"http/1.1"]).await;
    let url = format!("https://api.test:{}/hello", upstream.port());
    for asked in ["identity", "gzip;q=1.0, br;q=0.5", "gzip, compress", "*"] {
        let header = format!("Accept-Encoding: {asked}");
        let out = curl(&proxy, &["--http1.1", "-H", &header], url.clone()).await;
        assert_eq!(out.status, 200, "{out:?}");
    }
    let sent: Vec<String> = upstream
        .records()
        .iter()
        .map(|r| r.headers["accept-encoding"].to_str().unwrap().to_owned())
        .collect();
    // Byte for byte when every coding is one sluice decodes (a client may have signed it);
    // otherwise exactly the codings it can decode, so that every answer can be scanned.
    assert_eq!(
        sent,
        [
            "identity",
            "gzip;q=1.0, br;q=0.5",
            "gzip, deflate, br, zstd",
            "gzip, deflate, br, zstd"
        ]
    );
}

#[tokio::test]
async fn http1_only_upstreams_get_http1() {
    let (_pki, upstream, proxy) = setup(&[b"http/1.1"]).await;
    let url = format!("https://api.test:{}/hello", upstream.port());
    let out = curl(&proxy, &["--http2"], url).await;
    assert_eq!(out.status, 200, "{out:?}");
    assert_eq!(upstream.records()[0].version, http::Version::HTTP_11);
    assert_eq!(
        upstream.records()[0].headers["host"],
        format!("api.test:{}", upstream.port())
    );
}

#[tokio::test]
async fn missing_or_wrong_proxy_credentials_get_407() {
    let (_pki, upstream, proxy) = setup(&[b"http/1.1"]).await;
    let authority = format!("api.test:{}", upstream.port());
    let none = client::connect(proxy.addr(), &authority, None)
        .await
        .unwrap_err();
    assert_eq!(none.status(), 407, "{}", none.head);
    assert!(
        none.head
            .to_ascii_lowercase()
            .contains("sluice-error: proxy-auth-required")
    );
    let wrong = client::connect(proxy.addr(), &authority, Some("Basic c2x1aWNlOndyb25n"))
        .await
        .unwrap_err();
    assert_eq!(wrong.status(), 407);
    // Another run's credentials are wrong credentials.
    let other = TestProxy::start(POLICY, &TestPki::new(), HOSTS).await;
    let foreign = client::basic_auth(&other.url());
    let refused = client::connect(proxy.addr(), &authority, Some(&foreign))
        .await
        .unwrap_err();
    assert_eq!(refused.status(), 407);
    assert_eq!(upstream.connections(), 0);
    let audit = proxy.stop().await;
    assert_eq!(audit.iter().filter(|l| is_event(l, "auth_fail")).count(), 3);
    other.stop().await;
}

#[tokio::test]
async fn a_malformed_connect_target_is_refused_and_audited() {
    let (_pki, upstream, proxy) = setup(&[b"http/1.1"]).await;
    let auth = client::basic_auth(&proxy.url());
    // No port, port 0, a port no u16 holds, userinfo: each names no tunnel.
    let targets = [
        "api.test",
        "api.test:0",
        "api.test:99999",
        "user@api.test:443",
    ];
    for target in targets {
        let refused = client::connect(proxy.addr(), target, Some(&auth))
            .await
            .unwrap_err();
        assert_eq!(refused.status(), 400, "{target}: {}", refused.head);
        assert!(
            refused
                .head
                .to_ascii_lowercase()
                .contains("sluice-error: bad-request"),
            "{target}: {}",
            refused.head
        );
    }
    assert_eq!(upstream.connections(), 0);
    let audit = proxy.stop().await;
    // Every refusal is in the audit log: one `refuse` event per malformed CONNECT.
    let refused: Vec<&String> = audit
        .iter()
        .filter(|l| is_event(l, "refuse") && l.contains("\"method\":\"CONNECT\""))
        .collect();
    assert_eq!(refused.len(), targets.len(), "{audit:#?}");
    assert!(
        refused
            .iter()
            .all(|l| l.contains("\"reason\":\"bad-request\""))
    );
}

#[tokio::test]
async fn unlisted_hosts_are_refused_before_any_dial() {
    let (_pki, upstream, proxy) = setup(&[b"http/1.1"]).await;
    let authority = format!("unlisted.test:{}", upstream.port());
    let refused = client::connect(
        proxy.addr(),
        &authority,
        Some(&client::basic_auth(&proxy.url())),
    )
    .await
    .unwrap_err();
    assert_eq!(refused.status(), 403, "{}", refused.head);
    assert!(
        refused
            .head
            .to_ascii_lowercase()
            .contains("sluice-error: host-not-allowed")
    );
    let out = curl(
        &proxy,
        &[],
        format!("https://unlisted.test:{}/", upstream.port()),
    )
    .await;
    assert_ne!(out.status, 200);
    assert_eq!(
        upstream.connections(),
        0,
        "nothing may be dialled for an unlisted host"
    );
    let audit = proxy.stop().await;
    assert!(
        audit
            .iter()
            .any(|l| is_event(l, "deny") && l.contains("unlisted.test"))
    );
}

#[tokio::test]
async fn a_request_naming_another_host_gets_421_over_http1_and_http2() {
    let (_pki, upstream, proxy) = setup(&[b"h2", b"http/1.1"]).await;
    let port = upstream.port();
    let authority = format!("api.test:{port}");
    for alpn in [&[b"http/1.1".as_slice()][..], &[b"h2".as_slice()][..]] {
        let mut tunnel = proxy
            .at()
            .open(&authority, "api.test", alpn)
            .await
            .expect("tunnel");
        let misdirected = if tunnel.is_h2() {
            get(&format!("https://other.test:{port}/steal"))
        } else {
            let mut req = get("/steal");
            req.headers_mut()
                .insert("host", format!("other.test:{port}").parse().unwrap());
            req
        };
        let response = tunnel.send(misdirected).await.expect("response");
        assert_eq!(response.status(), 421, "h2={}", tunnel.is_h2());
        assert_eq!(response.headers()["sluice-error"], "misdirected-request");
        // The same tunnel still serves its own host.
        let own = if tunnel.is_h2() {
            get(&format!("https://api.test:{port}/fine"))
        } else {
            let mut req = get("/fine");
            req.headers_mut().insert("host", authority.parse().unwrap());
            req
        };
        assert_eq!(tunnel.send(own).await.expect("response").status(), 200);
    }
    let records = upstream.records();
    assert_eq!(records.len(), 2);
    assert!(records.iter().all(|r| r.uri.path() == "/fine"));
    proxy.stop().await;
}

#[tokio::test]
async fn sni_naming_another_host_is_refused_at_the_handshake() {
    let (_pki, upstream, proxy) = setup(&[b"http/1.1"]).await;
    let authority = format!("api.test:{}", upstream.port());
    let result = proxy
        .at()
        .open(&authority, "other.test", &[b"http/1.1"])
        .await;
    assert!(result.is_err(), "a handshake for another name must fail");
    assert_eq!(upstream.connections(), 0);
    let audit = proxy.stop().await;
    assert!(audit.iter().any(|l| l.contains("tls-handshake-refused")));
}

/// Which upstream connection (numbered by the upstream) served one GET on `tunnel`.
async fn upstream_conn((authority, tunnel): &mut (String, TunnelClient)) -> String {
    let mut req = get("/again");
    req.headers_mut().insert("host", authority.parse().unwrap());
    let response = tunnel.send(req).await.expect("response");
    assert_eq!(response.status(), 200);
    response.headers()["x-upstream-conn"]
        .to_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn pooled_upstream_connections_serve_one_destination_and_expire_when_idle() {
    let pki = TestPki::new();
    let upstream = RecordingUpstream::start(&pki, HOSTS, &[b"http/1.1"]).await;
    let proxy = TestProxy::start_with(POLICY, &pki, HOSTS, |config| {
        config.timeouts.idle = Duration::from_millis(300);
    })
    .await;
    let port = upstream.port();
    let mut tunnels = Vec::new();
    for host in ["api.test", "other.test"] {
        let authority = format!("{host}:{port}");
        let tunnel = proxy
            .at()
            .open(&authority, host, &[b"http/1.1"])
            .await
            .expect("tunnel");
        tunnels.push((authority, tunnel));
    }
    // Reused for its own destination, never for another host on the same address.
    assert_eq!(upstream_conn(&mut tunnels[0]).await, "1");
    assert_eq!(upstream_conn(&mut tunnels[0]).await, "1");
    assert_eq!(upstream_conn(&mut tunnels[1]).await, "2");
    assert_eq!(upstream_conn(&mut tunnels[0]).await, "1");
    // Idle past the timeout: closed, and the next request gets a new connection.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(upstream_conn(&mut tunnels[0]).await, "3");
    assert_eq!(upstream.connections(), 3);
    proxy.stop().await;
}

/// An HTTP/1.1 connection through a new tunnel to `host`, for requests whose bodies the
/// test reads (or drops) itself.
async fn raw_tunnel(
    proxy: &TestProxy,
    host: &str,
    port: u16,
) -> hyper::client::conn::http1::SendRequest<Full<Bytes>> {
    let authority = format!("{host}:{port}");
    let tls = proxy
        .at()
        .tls_tunnel(&authority, host, &[b"http/1.1"])
        .await
        .expect("tunnel");
    let (send, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    send
}

fn get_on(host: &str, port: u16, path: &str) -> Request<Full<Bytes>> {
    let mut req = get(path);
    req.headers_mut()
        .insert("host", format!("{host}:{port}").parse().unwrap());
    req
}

#[tokio::test]
async fn a_pooled_connection_is_not_reused_while_its_response_is_read_nor_after_it_was_abandoned() {
    use http_body_util::BodyExt;
    let (_pki, upstream, proxy) = setup(&[b"http/1.1"]).await;
    let port = upstream.port();
    let conn_of = |response: &http::Response<hyper::body::Incoming>| {
        response.headers()["x-upstream-conn"]
            .to_str()
            .unwrap()
            .to_owned()
    };
    // A: the head of a response whose body is held back upstream.
    let mut a = raw_tunnel(&proxy, "api.test", port).await;
    let held = a
        .send_request(get_on("api.test", port, "/hold"))
        .await
        .expect("head");
    assert_eq!(conn_of(&held), "1");
    // B meanwhile: answered at once, on another connection (1 is busy, not waited for).
    let mut b = raw_tunnel(&proxy, "api.test", port).await;
    let quick = tokio::time::timeout(
        sluice_integration_tests::upstream::HOLD / 2,
        b.send_request(get_on("api.test", port, "/fine")),
    )
    .await
    .expect("not queued behind the held body")
    .expect("response");
    assert_eq!(conn_of(&quick), "2");
    assert_eq!(quick.into_body().collect().await.unwrap().to_bytes(), "ok");
    // A's body arrives whole once the upstream sends the rest.
    assert_eq!(
        held.into_body().collect().await.unwrap().to_bytes(),
        "firstlast"
    );

    // C takes an idle connection for another held response and is dropped mid-body: that
    // connection must never carry another request (its stream holds the unread rest).
    let mut c = raw_tunnel(&proxy, "api.test", port).await;
    let abandoned = c
        .send_request(get_on("api.test", port, "/hold"))
        .await
        .expect("head");
    let abandoned_conn = conn_of(&abandoned);
    drop(abandoned);
    drop(c);
    tokio::time::sleep(Duration::from_millis(100)).await;
    for _ in 0..4 {
        let response = b
            .send_request(get_on("api.test", port, "/fine"))
            .await
            .expect("response");
        assert_ne!(conn_of(&response), abandoned_conn);
        assert_eq!(
            response.into_body().collect().await.unwrap().to_bytes(),
            "ok"
        );
    }
    proxy.stop().await;
}

#[tokio::test]
async fn keep_alive_is_reused_on_both_legs() {
    let (_pki, upstream, proxy) = setup(&[b"http/1.1"]).await;
    let port = upstream.port();
    let authority = format!("api.test:{port}");
    let mut tunnel = proxy
        .at()
        .open(&authority, "api.test", &[b"http/1.1"])
        .await
        .expect("tunnel");
    for _ in 0..5 {
        let mut req = get("/again");
        req.headers_mut().insert("host", authority.parse().unwrap());
        let response = tunnel.send(req).await.expect("response");
        assert_eq!(response.status(), 200);
        assert_eq!(response.headers()["x-upstream-conn"], "1");
        assert!(
            response
                .headers()
                .get("connection")
                .is_none_or(|v| v != "close")
        );
    }
    // A new tunnel (new client connection) still rides the pooled upstream connection.
    let out = curl(
        &proxy,
        &["--http1.1"],
        format!("https://api.test:{port}/again"),
    )
    .await;
    assert_eq!(out.status, 200);
    assert_eq!(upstream.connections(), 1);
    assert_eq!(upstream.records().len(), 6);
    proxy.stop().await;
}

#[tokio::test]
async fn a_name_pinned_to_loopback_without_allow_ips_is_refused() {
    let pki = TestPki::new();
    let upstream = RecordingUpstream::start(&pki, HOSTS, &[b"http/1.1"]).await;
    let policy = POLICY.replace("  allow_ips: [\"127.0.0.1/32\"]\n", "");
    let proxy = TestProxy::start(&policy, &pki, HOSTS).await;
    let out = curl(
        &proxy,
        &["-i"],
        format!("https://api.test:{}/", upstream.port()),
    )
    .await;
    assert_eq!(out.status, 403, "{out:?}");
    assert!(
        out.body.contains("sluice-error: address-blocked"),
        "{}",
        out.body
    );
    assert!(out.body.contains("loopback"), "{}", out.body);
    // Passthrough dials happen before the 200, so they are refused the same way.
    let authority = format!("pass.test:{}", upstream.port());
    let refused = client::connect(
        proxy.addr(),
        &authority,
        Some(&client::basic_auth(&proxy.url())),
    )
    .await
    .unwrap_err();
    assert_eq!(refused.status(), 403);
    assert_eq!(upstream.connections(), 0);
    proxy.stop().await;
}

#[tokio::test]
async fn an_upstream_with_an_untrusted_certificate_gets_502_and_nothing_sent() {
    let pki = TestPki::new();
    let upstream = RecordingUpstream::start(&pki, HOSTS, &[b"http/1.1"]).await;
    // The proxy trusts another test CA, not the upstream's.
    let stranger = TestPki::new();
    let proxy = TestProxy::start(POLICY, &stranger, HOSTS).await;
    let out = curl(
        &proxy,
        &["-i"],
        format!("https://api.test:{}/", upstream.port()),
    )
    .await;
    assert_eq!(out.status, 502, "{out:?}");
    assert!(
        out.body.contains("sluice-error: upstream-tls"),
        "{}",
        out.body
    );
    assert!(upstream.records().is_empty());
    proxy.stop().await;
}

#[tokio::test]
async fn a_slow_upstream_gets_504() {
    let pki = TestPki::new();
    let upstream = RecordingUpstream::start(&pki, HOSTS, &[b"http/1.1"]).await;
    let proxy = TestProxy::start_with(POLICY, &pki, HOSTS, |config| {
        config.timeouts.response = Duration::from_millis(500);
    })
    .await;
    let out = curl(
        &proxy,
        &["-i"],
        format!("https://api.test:{}/slow", upstream.port()),
    )
    .await;
    assert_eq!(out.status, 504, "{out:?}");
    assert!(out.body.contains("sluice-error: upstream-timeout"));
    proxy.stop().await;
}

#[tokio::test]
async fn passthrough_hosts_are_tunnelled_without_inspection() {
    let (pki, upstream, proxy) = setup(&[b"http/1.1"]).await;
    let port = upstream.port();
    // The client sees the upstream's own certificate: it must trust the upstream's CA,
    // and sluice's CA would not do.
    let proxy_url = proxy.url();
    let upstream_ca = pki.ca_path();
    let out = tokio::task::spawn_blocking(move || {
        Curl::new(&proxy_url, &upstream_ca).get(&format!("https://pass.test:{port}/through"))
    })
    .await
    .unwrap();
    assert_eq!(out.status, 200, "{out:?}");
    let audit = proxy.stop().await;
    assert!(
        audit
            .iter()
            .any(|l| is_event(l, "tunnel") && l.contains("pass.test"))
    );
}

#[tokio::test]
async fn shutdown_drains_in_flight_requests() {
    let (_pki, upstream, proxy) = setup(&[b"http/1.1"]).await;
    let url = format!("https://api.test:{}/slow", upstream.port());
    let proxy_url = proxy.url();
    let ca = proxy.ca_path();
    let in_flight = tokio::task::spawn_blocking(move || Curl::new(&proxy_url, &ca).get(&url));
    // Let the request reach the upstream, then stop.
    for _ in 0..100 {
        if !upstream.records().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(upstream.records().len(), 1);
    let addr = proxy.addr();
    let audit = proxy.stop().await;
    let out = in_flight.await.unwrap();
    assert_eq!(out.status, 200, "the in-flight request completes: {out:?}");
    assert_eq!(out.body, "slow");
    assert!(audit.last().is_some_and(|l| is_event(l, "stop")));
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "no longer listening"
    );
}

#[tokio::test]
async fn worker_threads_serve_every_protocol_and_drain_at_shutdown() {
    let pki = TestPki::new();
    let upstream = RecordingUpstream::start(&pki, HOSTS, &[b"h2", b"http/1.1"]).await;
    let proxy = TestProxy::start_with(POLICY, &pki, HOSTS, |config| config.workers = 2).await;
    let port = upstream.port();
    // Several clients at once, on workers that share the one listener.
    let clients: Vec<_> = (0..8)
        .map(|i| {
            let flag = if i % 2 == 0 { "--http1.1" } else { "--http2" };
            let (proxy_url, ca) = (proxy.url(), proxy.ca_path());
            let url = format!("https://api.test:{port}/hello");
            tokio::task::spawn_blocking(move || Curl::new(&proxy_url, &ca).args([flag]).get(&url))
        })
        .collect();
    for client in clients {
        let out = client.await.expect("curl task");
        assert_eq!(out.status, 200, "{out:?}");
        assert_eq!(out.body, "ok");
    }
    // Refusals are decided on the workers too.
    let refused = curl(&proxy, &[], format!("https://unlisted.test:{port}/x")).await;
    assert_ne!(refused.status, 200, "{refused:?}");
    let url = format!("https://api.test:{port}/slow");
    let proxy_url = proxy.url();
    let ca = proxy.ca_path();
    let in_flight = tokio::task::spawn_blocking(move || Curl::new(&proxy_url, &ca).get(&url));
    for _ in 0..200 {
        if upstream.records().len() == 9 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(upstream.records().len(), 9, "8 hellos and the slow request");
    let addr = proxy.addr();
    let audit = proxy.stop().await;
    let out = in_flight.await.unwrap();
    assert_eq!(out.status, 200, "the in-flight request completes: {out:?}");
    assert_eq!(out.body, "slow");
    assert!(audit.last().is_some_and(|l| is_event(l, "stop")));
    assert!(audit.iter().any(|l| is_event(l, "deny")), "{audit:?}");
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "no longer listening"
    );
}

#[tokio::test]
async fn websocket_handshakes_are_scanned_and_what_follows_must_be_frames() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (_pki, upstream, proxy) = setup(&[b"h2", b"http/1.1"]).await;
    let authority = format!("api.test:{}", upstream.port());
    let tls = proxy
        .at()
        .tls_tunnel(&authority, "api.test", &[b"http/1.1"])
        .await
        .expect("tunnel");
    let (mut send, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
        .await
        .expect("handshake");
    tokio::spawn(conn.with_upgrades());
    let placeholder = proxy
        .proxy
        .placeholders()
        .get("api_token")
        .unwrap()
        .to_owned();
    let request = Request::get("/ws")
        .header("host", authority.as_str())
        .header("connection", "Upgrade")
        .header("upgrade", "websocket")
        .header("authorization", format!("Bearer {placeholder}"))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let mut response = send.send_request(request).await.expect("response");
    assert_eq!(response.status(), 101);
    let upgraded = hyper::upgrade::on(&mut response).await.expect("upgraded");
    let mut io = hyper_util::rt::TokioIo::new(upgraded);
    // Bytes that are not a WebSocket frame are not relayed: sluice closes instead (the
    // upstream here would echo them uppercased).
    io.write_all(b"hello frames").await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), io.read_to_end(&mut answer))
        .await
        .expect("sluice closes the connection")
        .ok();
    assert_eq!(answer.first(), Some(&0x88), "a close frame: {answer:?}");
    assert!(
        !answer.windows(5).any(|w| w == b"HELLO"),
        "the raw bytes never reached the upstream: {answer:?}"
    );
    // The handshake was scanned and swapped like any request, and went over HTTP/1.1.
    let handshake = &upstream.records()[0];
    assert_eq!(handshake.version, http::Version::HTTP_11);
    assert_eq!(
        handshake.headers["authorization"],
        "Bearer test-token-value-0001"
    );
    assert_eq!(handshake.headers["upgrade"], "websocket");
    drop(io);
    let audit = proxy.stop().await;
    assert!(
        audit
            .iter()
            .any(|l| is_event(l, "tunnel") && l.contains("upgrade"))
    );
    assert!(audit.iter().any(|l| is_event(l, "swap")));
}

#[tokio::test]
async fn an_http2_websocket_goes_upstream_with_a_key_sluice_made_and_checks() {
    let (_pki, upstream, proxy) = setup(&[b"h2", b"http/1.1"]).await;
    let port = upstream.port();
    let tls = proxy
        .at()
        .tunnel_to("api.test", port, &[b"h2"])
        .await
        .expect("tunnel");
    let (mut send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tls),
    )
    .await
    .expect("h2 handshake");
    tokio::spawn(conn);
    // A plain request first, so that sluice's SETTINGS have arrived.
    let probe = Request::get(format!("https://api.test:{port}/first"))
        .body(Full::new(Bytes::new()))
        .unwrap();
    send.send_request(probe).await.expect("probe answered");
    // RFC 8441's WebSocket handshake: CONNECT with `:protocol websocket`.
    let connect = |path: &str| {
        let mut connect = Request::connect(format!("https://api.test:{port}{path}"))
            .version(http::Version::HTTP_2)
            .header("sec-websocket-version", "13")
            .body(Full::new(Bytes::new()))
            .unwrap();
        connect
            .extensions_mut()
            .insert(hyper::ext::Protocol::from_static("websocket"));
        connect
    };
    let response = send.send_request(connect("/ws")).await.expect("answered");
    // This upstream answers 101 without the accept value of the key: not a WebSocket.
    assert_eq!(response.status(), 502);
    let records = upstream.records();
    let handshake = records
        .iter()
        .find(|r| r.uri.path() == "/ws")
        .expect("the handshake went upstream");
    assert_eq!(handshake.method, http::Method::GET);
    assert_eq!(handshake.version, http::Version::HTTP_11);
    assert_eq!(handshake.headers["upgrade"], "websocket");
    assert_eq!(handshake.headers["sec-websocket-version"], "13");
    let key = handshake.headers["sec-websocket-key"].to_str().unwrap();
    use base64::Engine;
    let nonce = base64::engine::general_purpose::STANDARD
        .decode(key)
        .expect("the key is base64");
    assert_eq!(nonce.len(), 16, "{key}");
    // An upstream answering 200 instead of 101 would tell the HTTP/2 client its WebSocket
    // opened: sluice answers 502.
    let response = send
        .send_request(connect("/not-a-socket"))
        .await
        .expect("answered");
    assert_eq!(response.status(), 502);
    assert!(
        upstream
            .records()
            .iter()
            .any(|r| r.uri.path() == "/not-a-socket")
    );
    proxy.stop().await;
}

#[tokio::test]
async fn oversized_heads_get_431_and_slow_heads_are_cut_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let pki = TestPki::new();
    let upstream = RecordingUpstream::start(&pki, HOSTS, &[b"http/1.1"]).await;
    let proxy = TestProxy::start_with(POLICY, &pki, HOSTS, |config| {
        config.limits.header_read_timeout = Duration::from_millis(500);
    })
    .await;
    // A 100 KiB header inside the tunnel: 431 over HTTP/1.1, a refused stream over HTTP/2.
    let big = format!("X-Big: {}", "a".repeat(100 * 1024));
    let url = format!("https://api.test:{}/", upstream.port());
    let h1 = curl(&proxy, &["-i", "--http1.1", "-H", &big], url.clone()).await;
    assert_eq!(h1.status, 431, "{h1:?}");
    let h2 = curl(&proxy, &["-i", "--http2", "-H", &big], url).await;
    assert_ne!(h2.status, 200, "{h2:?}");
    assert!(upstream.records().is_empty());
    // A client that never finishes its head is disconnected.
    let mut slow = tokio::net::TcpStream::connect(proxy.addr()).await.unwrap();
    slow.write_all(b"CONNECT api.test:443 HTTP/1.1\r\nHost: api.test")
        .await
        .unwrap();
    let mut buf = [0u8; 256];
    let read = tokio::time::timeout(Duration::from_secs(5), slow.read(&mut buf)).await;
    match read {
        Ok(Ok(_)) | Ok(Err(_)) => {} // closed (0 bytes, or a 408 then close, or reset)
        Err(_) => panic!("a slow client held its connection past the header read timeout"),
    }
    proxy.stop().await;
}

#[tokio::test]
async fn a_run_without_secrets_passes_bodies_as_they_came() {
    let pki = TestPki::new();
    let upstream = RecordingUpstream::start(&pki, HOSTS, &[b"http/1.1"]).await;
    let policy = "version: 1\negress:\n  allow: [\"api.test\"]\n  allow_ips: [\"127.0.0.1/32\"]\n";
    let proxy = TestProxy::start(policy, &pki, HOSTS).await;
    let out = curl(
        &proxy,
        &["-i", "--data-binary", "plain words"],
        format!("https://api.test:{}/echo/gzip", upstream.port()),
    )
    .await;
    assert_eq!(out.status, 200, "{out:?}");
    // Still compressed: nothing to redact, so nothing decoded.
    assert!(
        out.body
            .to_ascii_lowercase()
            .contains("content-encoding: gzip"),
        "{}",
        out.body
    );
    assert_eq!(upstream.records()[0].body, "plain words".as_bytes());
    proxy.stop().await;
}

#[tokio::test]
async fn a_non_proxy_request_gets_400_and_is_audited() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (_pki, _upstream, proxy) = setup(&[b"http/1.1"]).await;
    let mut tcp = tokio::net::TcpStream::connect(proxy.addr()).await.unwrap();
    let head = format!(
        "GET /index.html HTTP/1.1\r\nHost: somewhere\r\nProxy-Authorization: {}\r\nConnection: close\r\n\r\n",
        client::basic_auth(&proxy.url())
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(
        answer
            .to_ascii_lowercase()
            .contains("sluice-error: bad-request")
    );
    let audit = proxy.stop().await;
    assert!(
        audit
            .iter()
            .any(|l| is_event(l, "refuse") && l.contains("bad-request"))
    );
}

#[tokio::test]
async fn an_upgrade_request_body_is_scanned_before_anything_leaves() {
    let (_pki, upstream, proxy) = setup(&[b"http/1.1"]).await;
    // other.test is reachable but api_token is not granted there: its value may not go.
    let authority = format!("other.test:{}", upstream.port());
    let mut tunnel = proxy
        .at()
        .open(&authority, "other.test", &[b"http/1.1"])
        .await
        .expect("tunnel");
    let request = Request::get("/ws")
        .header("host", authority.as_str())
        .header("connection", "Upgrade")
        .header("upgrade", "websocket")
        .body(Full::new(Bytes::from_static(
            b"smuggle test-token-value-0001 out",
        )))
        .unwrap();
    let response = tunnel.send(request).await.expect("response");
    assert_eq!(response.status(), 403);
    assert!(upstream.records().is_empty(), "the upgrade handshake left");
    assert_eq!(upstream.connections(), 0);
    proxy.stop().await;
}

/// A client session store that counts the TLS 1.3 tickets it is given and, when asked,
/// offers the last one to whatever host comes next (as no honest client would).
#[derive(Debug)]
struct Tickets {
    inner: rustls::client::ClientSessionMemoryCache,
    inserted: std::sync::atomic::AtomicUsize,
    offer_to_any_host: std::sync::atomic::AtomicBool,
    offered_to_any_host: std::sync::atomic::AtomicUsize,
    last: std::sync::Mutex<Option<rustls::client::Tls13ClientSessionValue>>,
}

impl Tickets {
    fn new() -> Self {
        Self {
            inner: rustls::client::ClientSessionMemoryCache::new(8),
            inserted: Default::default(),
            offer_to_any_host: Default::default(),
            offered_to_any_host: Default::default(),
            last: Default::default(),
        }
    }
}

impl rustls::client::ClientSessionStore for Tickets {
    fn set_kx_hint(&self, name: rustls_pki_types::ServerName<'static>, group: rustls::NamedGroup) {
        self.inner.set_kx_hint(name, group);
    }
    fn kx_hint(&self, name: &rustls_pki_types::ServerName<'_>) -> Option<rustls::NamedGroup> {
        self.inner.kx_hint(name)
    }
    fn set_tls12_session(
        &self,
        name: rustls_pki_types::ServerName<'static>,
        value: rustls::client::Tls12ClientSessionValue,
    ) {
        self.inner.set_tls12_session(name, value);
    }
    fn tls12_session(
        &self,
        name: &rustls_pki_types::ServerName<'_>,
    ) -> Option<rustls::client::Tls12ClientSessionValue> {
        self.inner.tls12_session(name)
    }
    fn remove_tls12_session(&self, name: &rustls_pki_types::ServerName<'static>) {
        self.inner.remove_tls12_session(name);
    }
    fn insert_tls13_ticket(
        &self,
        name: rustls_pki_types::ServerName<'static>,
        value: rustls::client::Tls13ClientSessionValue,
    ) {
        use std::sync::atomic::Ordering;
        self.inserted.fetch_add(1, Ordering::SeqCst);
        if self.offer_to_any_host.load(Ordering::SeqCst) {
            *self.last.lock().unwrap() = Some(value);
        } else {
            self.inner.insert_tls13_ticket(name, value);
        }
    }
    fn take_tls13_ticket(
        &self,
        name: &rustls_pki_types::ServerName<'static>,
    ) -> Option<rustls::client::Tls13ClientSessionValue> {
        use std::sync::atomic::Ordering;
        if self.offer_to_any_host.load(Ordering::SeqCst) {
            let last = self.last.lock().unwrap().take();
            if last.is_some() {
                self.offered_to_any_host.fetch_add(1, Ordering::SeqCst);
            }
            last
        } else {
            self.inner.take_tls13_ticket(name)
        }
    }
}

/// Opens a TLS tunnel to `host` with `connector`, sends one GET (reading the response also
/// reads the ticket that follows the handshake) and returns how the handshake went.
async fn one_get(
    proxy: &TestProxy,
    connector: &tokio_rustls::TlsConnector,
    host: &str,
    port: u16,
) -> Option<rustls::HandshakeKind> {
    let authority = format!("{host}:{port}");
    let tcp = client::connect(
        proxy.addr(),
        &authority,
        Some(&client::basic_auth(&proxy.url())),
    )
    .await
    .expect("CONNECT");
    let name = rustls_pki_types::ServerName::try_from(host.to_owned()).expect("name");
    let tls = connector.connect(name, tcp).await.expect("TLS");
    let kind = tls.get_ref().1.handshake_kind();
    let (mut send, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    let mut request = get("/fine");
    request
        .headers_mut()
        .insert("host", authority.parse().unwrap());
    let response = send.send_request(request).await.expect("response");
    assert_eq!(response.status(), 200);
    http_body_util::BodyExt::collect(response.into_body())
        .await
        .expect("body");
    kind
}

#[tokio::test]
async fn a_client_resumes_its_tls_session_with_the_one_ticket_sluice_sends() {
    use rustls::HandshakeKind::{Full, Resumed};
    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;
    use std::sync::atomic::Ordering;

    let (_pki, upstream, proxy) = setup(&[b"http/1.1"]).await;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(proxy.ca_path()).expect("ca pem") {
        roots.add(cert.expect("ca cert")).expect("add root");
    }
    let tickets = std::sync::Arc::new(Tickets::new());
    let mut config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.resumption = rustls::client::Resumption::store(tickets.clone());
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let port = upstream.port();

    assert_eq!(
        one_get(&proxy, &connector, "api.test", port).await,
        Some(Full)
    );
    assert_eq!(
        tickets.inserted.load(Ordering::SeqCst),
        1,
        "one ticket per handshake"
    );
    assert_eq!(
        one_get(&proxy, &connector, "api.test", port).await,
        Some(Resumed)
    );

    // A ticket sluice gave in a tunnel to api.test, offered in a tunnel to other.test:
    // another host's sessions are not that host's, so the handshake is a full one.
    tickets.offer_to_any_host.store(true, Ordering::SeqCst);
    one_get(&proxy, &connector, "api.test", port).await;
    assert!(tickets.last.lock().unwrap().is_some(), "a ticket to offer");
    assert_eq!(
        one_get(&proxy, &connector, "other.test", port).await,
        Some(Full)
    );
    assert_eq!(
        tickets.offered_to_any_host.load(Ordering::SeqCst),
        1,
        "the api.test ticket was offered to other.test"
    );
    proxy.stop().await;
}

/// A refusal answered before the request's body was read reaches a client still streaming
/// a large upload (chunked, as a client sends a body of unknown length): sluice drains the
/// rest before it closes (`proxy::linger`) instead of closing on unread data, which resets
/// the connection and loses the answer (hyper's client, still writing, reports the write
/// error instead of the refusal).
#[tokio::test]
async fn a_streamed_upload_refused_before_its_body_is_read_gets_its_refusal_not_a_reset() {
    use http_body_util::{BodyExt, StreamBody};
    let (_pki, upstream, proxy) = setup(&[b"http/1.1"]).await;
    let placeholder = proxy
        .proxy
        .placeholders()
        .get("api_token")
        .unwrap()
        .to_owned();
    let authority = format!("other.test:{}", upstream.port());
    for round in 0..5 {
        let tls = proxy
            .at()
            .tls_tunnel(&authority, "other.test", &[b"http/1.1"])
            .await
            .expect("tunnel");
        let (mut send, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .expect("handshake");
        tokio::spawn(conn);
        // 8 MiB in 16 KiB chunks, fed as the client produces them.
        let (feed, chunks) = tokio::sync::mpsc::channel::<Bytes>(4);
        tokio::spawn(async move {
            for _ in 0..512 {
                if feed.send(Bytes::from(vec![b'u'; 16 * 1024])).await.is_err() {
                    break;
                }
            }
        });
        let stream = futures_util::stream::unfold(chunks, |mut chunks| async move {
            let chunk = chunks.recv().await?;
            Some((
                Ok::<_, std::convert::Infallible>(hyper::body::Frame::data(chunk)),
                chunks,
            ))
        });
        // The placeholder toward a host its secret does not grant: refused from the head.
        let request = Request::post("/upload")
            .header("host", authority.as_str())
            .header("authorization", format!("Bearer {placeholder}"))
            .body(StreamBody::new(stream).boxed())
            .unwrap();
        let response = send
            .send_request(request)
            .await
            .unwrap_or_else(|e| panic!("round {round}: no refusal, but {e:?}"));
        assert_eq!(response.status(), 403, "round {round}");
        assert_eq!(
            response.headers()["sluice-error"],
            "placeholder-not-granted",
            "round {round}"
        );
    }
    assert!(
        upstream.records().is_empty(),
        "nothing reached the upstream"
    );
}
