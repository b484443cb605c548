//! Raw HTTP/1.1 through the proxy: bytes written into a tunnel exactly as a test spelled
//! them (framing mistakes and all, what no HTTP client would send), and the answer read back
//! as text.
//!
//! It never parses beyond the status line: what the answer must hold is the test's to say.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::client::ProxyAt;

/// Opens an HTTP/1.1 tunnel to `host:port` through `proxy`, writes `raw` and reads until the
/// proxy closes the connection (so `raw` asks for `Connection: close`, or is refused).
///
/// # Panics
///
/// When the tunnel cannot be opened, or the proxy holds the connection open for 20 s.
pub async fn exchange(proxy: &ProxyAt, host: &str, port: u16, raw: &[u8]) -> String {
    let mut tls = proxy
        .tunnel_to(host, port, &[b"http/1.1"])
        .await
        .expect("tunnel");
    tls.write_all(raw).await.expect("write request");
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), tls.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    assert!(
        read.is_ok(),
        "the proxy held the connection open after {:?}, having sent {answer:?}",
        String::from_utf8_lossy(raw)
    );
    answer
}

/// The status code of the first response in `answer`, or 0 when there is none.
pub fn status_of(answer: &str) -> u16 {
    answer
        .strip_prefix("HTTP/1.1 ")
        .and_then(|rest| rest.get(..3))
        .and_then(|code| code.parse().ok())
        .unwrap_or(0)
}
