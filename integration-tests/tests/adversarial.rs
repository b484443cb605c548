//! Attacks a hostile sandbox would try on its own proxy, each checked on both sides: what
//! the client got, and what the recording upstream received (nothing).

use std::time::Duration;

use sluice_integration_tests::client;
use sluice_integration_tests::{RecordingUpstream, TestPki, TestProxy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const POLICY: &str = r#"
version: 1
secrets:
  api_token:
    value: "adv-REAL-value-0123456789"
    hosts: ["api.test"]
    sinks: [egress]
egress:
  allow_ips: ["127.0.0.1/32"]
"#;

const HOSTS: &[&str] = &["api.test", "loop.test"];

async fn setup() -> (TestPki, RecordingUpstream, TestProxy) {
    let pki = TestPki::new();
    let upstream = RecordingUpstream::start(&pki, HOSTS, &[b"http/1.1"]).await;
    let proxy = TestProxy::start(POLICY, &pki, HOSTS).await;
    (pki, upstream, proxy)
}

async fn connect_status(proxy: &TestProxy, authority: &str) -> u16 {
    match client::connect(
        proxy.addr(),
        authority,
        Some(&client::basic_auth(&proxy.url())),
    )
    .await
    {
        Ok(_) => 200,
        Err(refused) => refused.status(),
    }
}

#[tokio::test]
async fn name_and_address_tricks_on_connect() {
    let (_pki, upstream, proxy) = setup().await;
    let port = upstream.port();
    // Variants of the granted name normalise to it.
    for ok in [
        format!("API.TEST:{port}"),
        format!("api.test.:{port}"),
        format!("api.test:0{port}"),
    ] {
        assert_eq!(connect_status(&proxy, &ok).await, 200, "{ok}");
    }
    // The granted host's address, other spellings of loopback, userinfo, other names.
    for refused in [
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
        format!("[::ffff:127.0.0.1]:{port}"),
        format!("2130706433:{port}"),
        format!("0x7f.1:{port}"),
        format!("127.1:{port}"),
        format!("user@api.test:{port}"),
        format!("api.test.evil.test:{port}"),
        format!("evilapi.test:{port}"),
        "api.test".to_owned(),
    ] {
        let status = connect_status(&proxy, &refused).await;
        assert!(status == 403 || status == 400, "{refused}: {status}");
    }
    assert_eq!(
        upstream.connections(),
        0,
        "a refused CONNECT dialled the upstream"
    );
    proxy.stop().await;
}

#[tokio::test]
async fn sluice_never_dials_its_own_listener() {
    let pki = TestPki::new();
    // Grant a host, pin it to loopback, and aim it at the proxy's own port.
    let policy = POLICY.replace(
        "hosts: [\"api.test\"]",
        "hosts: [\"api.test\", \"loop.test\"]",
    );
    let proxy = TestProxy::start(&policy, &pki, HOSTS).await;
    let port = proxy.addr().port();
    let url = format!("https://loop.test:{port}/");
    let proxy_url = proxy.url();
    let ca = proxy.ca_path();
    let out = tokio::task::spawn_blocking(move || {
        sluice_integration_tests::Curl::new(&proxy_url, &ca)
            .args(["-i"])
            .get(&url)
    })
    .await
    .unwrap();
    assert_eq!(out.status, 403, "{out:?}");
    assert!(out.body.contains("own listener"), "{}", out.body);
    proxy.stop().await;
}

#[tokio::test]
async fn smuggling_framing_is_refused_inside_a_tunnel() {
    let (_pki, upstream, proxy) = setup().await;
    let authority = format!("api.test:{}", upstream.port());
    let cases: [&[u8]; 3] = [
        // Content-Length and Transfer-Encoding together, with a request smuggled behind.
        // hyper's parser lets Transfer-Encoding win (RFC 9112 §6.3), drops the length and
        // closes the connection after answering: the smuggled request is never read.
        b"POST / HTTP/1.1\r\nHost: AUTH\r\nContent-Length: 40\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: AUTH\r\n\r\n",
        // Two different lengths.
        b"POST / HTTP/1.1\r\nHost: AUTH\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde",
        // A malformed chunk size.
        b"POST / HTTP/1.1\r\nHost: AUTH\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
    ];
    for raw in cases {
        let raw = String::from_utf8_lossy(raw).replace("AUTH", &authority);
        let mut tls = proxy
            .at()
            .tls_tunnel(&authority, "api.test", &[b"http/1.1"])
            .await
            .expect("tunnel");
        tls.write_all(raw.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut answer)).await;
        let answer = String::from_utf8_lossy(&answer);
        let refused = answer.is_empty() || answer.starts_with("HTTP/1.1 400");
        let closed_after_one = answer.matches("HTTP/1.1 ").count() == 1
            && answer.to_ascii_lowercase().contains("connection: close");
        assert!(refused || closed_after_one, "{raw:?} got {answer}");
    }
    let records = upstream.records();
    assert!(
        records.iter().all(|r| r.uri.path() != "/smuggled"),
        "a smuggled request reached the upstream"
    );
    // Whatever was forwarded was framed once, by sluice: no body bytes beyond the chunks.
    assert!(records.iter().all(|r| r.body.is_empty()), "{records:?}");
    proxy.stop().await;
}

#[tokio::test]
async fn a_second_http2_stream_cannot_move_to_another_granted_host() {
    let pki = TestPki::new();
    let upstream = RecordingUpstream::start(&pki, HOSTS, &[b"h2"]).await;
    let policy = POLICY.replace(
        "hosts: [\"api.test\"]",
        "hosts: [\"api.test\", \"loop.test\"]",
    );
    let proxy = TestProxy::start(&policy, &pki, HOSTS).await;
    let port = upstream.port();
    let mut tunnel = proxy
        .at()
        .open(&format!("api.test:{port}"), "api.test", &[b"h2"])
        .await
        .expect("tunnel");
    let first = http::Request::get(format!("https://api.test:{port}/one"))
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    assert_eq!(tunnel.send(first).await.unwrap().status(), 200);
    // Coalescing: same connection, a host the same secret grants, still misdirected.
    let second = http::Request::get(format!("https://loop.test:{port}/two"))
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    assert_eq!(tunnel.send(second).await.unwrap().status(), 421);
    assert!(upstream.records().iter().all(|r| r.uri.path() == "/one"));
    proxy.stop().await;
}

/// Upstream certificates that must not verify: the request never leaves, the client gets
/// 502 with `upstream-tls`, and the audit log records it.
#[tokio::test]
async fn bad_upstream_certificates_get_502_and_the_secret_is_never_sent() {
    let pki = TestPki::new();
    let expired = pki.server_config_with(&["api.test"], &[b"http/1.1"], |params| {
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2021, 1, 1);
    });
    let wrong_host = pki.server_config(&["elsewhere.test"], &[b"http/1.1"]);
    let wrong_usage = pki.server_config_with(&["api.test"], &[b"http/1.1"], |params| {
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    });
    let self_signed = {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["api.test".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let mut config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls_pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        std::sync::Arc::new(config)
    };
    for (what, config) in [
        ("expired", expired),
        ("wrong host", wrong_host),
        ("client-auth only", wrong_usage),
        ("self-signed", self_signed),
    ] {
        let upstream = RecordingUpstream::start_with_config(config).await;
        let proxy = TestProxy::start(POLICY, &pki, HOSTS).await;
        let ph = proxy
            .proxy
            .placeholders()
            .get("api_token")
            .unwrap()
            .to_owned();
        let url = format!("https://api.test:{}/", upstream.port());
        let proxy_url = proxy.url();
        let ca = proxy.ca_path();
        let auth = format!("Authorization: Bearer {ph}");
        let out = tokio::task::spawn_blocking(move || {
            sluice_integration_tests::Curl::new(&proxy_url, &ca)
                .args(["-i", "-H", auth.as_str()])
                .get(&url)
        })
        .await
        .unwrap();
        assert_eq!(out.status, 502, "{what}: {out:?}");
        assert!(
            out.body.contains("sluice-error: upstream-tls"),
            "{what}: {}",
            out.body
        );
        assert!(
            upstream.records().is_empty(),
            "{what}: a request reached the upstream"
        );
        let audit = proxy.stop().await.join("\n");
        assert!(audit.contains("upstream-tls"), "{what}: not audited");
        assert!(!audit.contains("adv-REAL-value"), "{what}");
    }
}

/// Garbage where a ClientHello should be, and a ClientHello cut short: the tunnel is
/// closed, and the proxy keeps serving.
#[tokio::test]
async fn garbage_client_hellos_close_the_tunnel_and_the_service_stays_up() {
    let (_pki, upstream, proxy) = setup().await;
    let authority = format!("api.test:{}", upstream.port());
    let garbage: [&[u8]; 4] = [
        b"GET / HTTP/1.1\r\nHost: api.test\r\n\r\n",
        &[0x16, 0x03, 0x01, 0xff, 0xff, 0x01, 0x00],
        &[0x16, 0x03, 0x03, 0x00, 0x05, 0x01, 0x00, 0x00, 0x01, 0x00],
        &[0u8; 4096],
    ];
    for bytes in garbage {
        let mut tcp = client::connect(
            proxy.addr(),
            &authority,
            Some(&client::basic_auth(&proxy.url())),
        )
        .await
        .expect("CONNECT");
        let _ = tcp.write_all(bytes).await;
        let mut sink = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(15), tcp.read_to_end(&mut sink)).await;
        assert!(read.is_ok(), "a garbage ClientHello held the tunnel open");
    }
    // Still serving.
    let mut tunnel = proxy
        .at()
        .open(&authority, "api.test", &[b"http/1.1"])
        .await
        .expect("tunnel after abuse");
    let mut request = http::Request::get("/ok")
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    request
        .headers_mut()
        .insert("host", authority.parse().unwrap());
    assert_eq!(tunnel.send(request).await.unwrap().status(), 200);
    assert_eq!(upstream.connections(), 1);
    proxy.stop().await;
}
