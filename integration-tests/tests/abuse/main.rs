//! Abuse of the proxy by a hostile sandbox and by a misbehaving upstream: odd HTTP/1.1
//! framing inside a tunnel, HTTP/2 frame abuse, slow bodies and slow reads, connection
//! exhaustion, and upstreams that answer out of turn. Each case checks what the client got,
//! what the upstream received (usually nothing), and that the proxy still serves after it.

mod exhaustion;
mod framing;
mod http2;
mod misbehaving_upstream;
mod serve_process;
mod slow;

use bytes::Bytes;
use http_body_util::Full;
use sluice_integration_tests::TestProxy;
use sluice_integration_tests::client::ProxyAt;

/// Lowercase, so that it can also stand in a header name.
const VALUE: &str = "abuse-real-value-0123456789";

const POLICY: &str = r#"
version: 1
secrets:
  api_token:
    value: "abuse-real-value-0123456789"
    hosts: ["api.test"]
    sinks: [egress]
    in: [header, body]
egress:
  allow: ["other.test"]
  allow_ips: ["127.0.0.1/32"]
"#;

const HOSTS: &[&str] = &["api.test", "other.test"];

fn placeholder(proxy: &TestProxy) -> String {
    proxy
        .proxy
        .placeholders()
        .get("api_token")
        .expect("placeholder")
        .to_owned()
}

/// Opens an HTTP/1.1 tunnel to `host:port`, writes `raw` and reads until the proxy closes
/// the connection (every case asks for `Connection: close` or is refused).
async fn raw_exchange(proxy: &TestProxy, host: &str, port: u16, raw: &[u8]) -> String {
    sluice_integration_tests::raw::exchange(&proxy.at(), host, port, raw).await
}

/// A plain request on a fresh tunnel: the proxy still serves.
async fn assert_still_serves(proxy: &TestProxy, port: u16) {
    assert_still_serves_at(&proxy.at(), port).await;
}

async fn assert_still_serves_at(proxy: &ProxyAt, port: u16) {
    let authority = format!("api.test:{port}");
    let mut tunnel = proxy
        .open(&authority, "api.test", &[b"http/1.1"])
        .await
        .expect("a tunnel after the abuse");
    let request = http::Request::get("/still-serving")
        .header("host", authority.as_str())
        .body(Full::new(Bytes::new()))
        .expect("request");
    let response = tunnel
        .send(request)
        .await
        .expect("a response after the abuse");
    assert_eq!(response.status(), 200, "the proxy stopped serving");
}

/// Everything a recorded request carried, as text, for looking for a value.
fn recorded_text(record: &sluice_integration_tests::Recorded) -> String {
    format!(
        "{} {} {:?} {}",
        record.method,
        record.uri,
        record.headers,
        String::from_utf8_lossy(&record.body)
    )
}
