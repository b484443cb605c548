//! Connection and file-descriptor exhaustion: connections past the limit are closed, and
//! a proxy out of descriptors carries on; both serve again once freed.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use sluice_integration_tests::client;
use sluice_integration_tests::{RecordingUpstream, TestPki, TestProxy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::serve_process::ServeProcess;
use crate::{HOSTS, POLICY, assert_still_serves_at};

#[tokio::test]
async fn connections_beyond_the_limit_are_closed_and_served_again_once_freed() {
    let pki = TestPki::new();
    let upstream = RecordingUpstream::start(&pki, HOSTS, &[b"http/1.1"]).await;
    let proxy = TestProxy::start_with(POLICY, &pki, HOSTS, |config| {
        config.limits.max_connections = 4;
    })
    .await;
    let port = upstream.port();
    let authority = format!("api.test:{port}");
    let mut held = Vec::new();
    for n in 0..4 {
        let mut tunnel = proxy
            .at()
            .open(&authority, "api.test", &[b"http/1.1"])
            .await
            .expect("a tunnel within the limit");
        let request = http::Request::get(format!("/held-{n}"))
            .header("host", authority.as_str())
            .body(Full::new(Bytes::new()))
            .expect("request");
        assert_eq!(tunnel.send(request).await.expect("response").status(), 200);
        held.push(tunnel);
    }
    // Past the limit: accepted by the kernel, closed by sluice without a word.
    let auth = client::basic_auth(&proxy.url());
    for _ in 0..6 {
        let mut tcp = tokio::net::TcpStream::connect(proxy.addr())
            .await
            .expect("tcp");
        let head = format!(
            "CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\nProxy-Authorization: {auth}\r\n\r\n"
        );
        let _ = tcp.write_all(head.as_bytes()).await;
        let mut answer = Vec::new();
        let read =
            tokio::time::timeout(Duration::from_secs(20), tcp.read_to_end(&mut answer)).await;
        assert!(read.is_ok(), "an excess connection was held open");
        assert!(answer.is_empty(), "{}", String::from_utf8_lossy(&answer));
    }
    assert_eq!(upstream.records().len(), 4);
    // Freed slots serve again.
    drop(held);
    let mut served = false;
    for _ in 0..80 {
        if let Ok(mut tunnel) = proxy
            .at()
            .open(&authority, "api.test", &[b"http/1.1"])
            .await
        {
            let request = http::Request::get("/after")
                .header("host", authority.as_str())
                .body(Full::new(Bytes::new()))
                .expect("request");
            if tunnel.send(request).await.is_ok_and(|r| r.status() == 200) {
                served = true;
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(
        served,
        "the proxy did not serve again once connections closed"
    );
    let paths: Vec<String> = upstream
        .records()
        .iter()
        .map(|r| r.uri.path().to_owned())
        .collect();
    assert_eq!(
        paths,
        ["/held-0", "/held-1", "/held-2", "/held-3", "/after"]
    );
    proxy.stop().await;
}

#[tokio::test]
async fn running_out_of_file_descriptors_does_not_stop_the_proxy() {
    let pki = TestPki::new();
    let upstream = RecordingUpstream::start(&pki, HOSTS, &[b"http/1.1"]).await;
    // Few descriptors: the idle connections below exhaust them (accept fails with EMFILE).
    let mut serve = ServeProcess::start(POLICY, &pki, "ulimit -n 48 &&").await;
    let at = serve.at.clone();
    let port = upstream.port();
    assert_still_serves_at(&at, port).await;
    let mut idle = Vec::new();
    for _ in 0..80 {
        if let Ok(tcp) = tokio::net::TcpStream::connect(at.addr).await {
            idle.push(tcp);
        }
    }
    // They take every descriptor the proxy may have (accept then fails with EMFILE and is
    // retried), and the process carries on.
    let mut exhausted = false;
    for _ in 0..200 {
        if serve.open_fds() >= 47 {
            exhausted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        exhausted,
        "the proxy never ran out: {} fds",
        serve.open_fds()
    );
    serve.assert_alive();
    drop(idle);
    let mut served = false;
    for _ in 0..80 {
        let attempt = tokio::time::timeout(
            Duration::from_secs(5),
            at.tunnel_to("api.test", port, &[b"http/1.1"]),
        )
        .await;
        if let Ok(Ok(mut tls)) = attempt {
            let raw = format!(
                "GET /after HTTP/1.1\r\nHost: api.test:{port}\r\nConnection: close\r\n\r\n"
            );
            let _ = tls.write_all(raw.as_bytes()).await;
            let mut answer = Vec::new();
            let _ =
                tokio::time::timeout(Duration::from_secs(5), tls.read_to_end(&mut answer)).await;
            if answer.starts_with(b"HTTP/1.1 200") {
                served = true;
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(
        served,
        "the proxy did not recover once descriptors were free again"
    );
    serve.assert_alive();
    assert!(
        upstream
            .records()
            .iter()
            .all(|r| ["/still-serving", "/after"].contains(&r.uri.path()))
    );
}
