//! A TLS upstream on 127.0.0.1 for `api.test`, HTTP/1.1 only, that answers each request
//! head with bytes the test wrote: framing mistakes and all, what hyper would never send
//! (two responses to one request, a response to none, `Content-Length` beside chunks).
//!
//! It reads request heads only (a request body is not told apart from what follows), records
//! them as text, and leaves what an answer must look like to the test.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::listen::TlsListener;
use crate::pki::TestPki;

/// The answer to request number N (counted from 0 across connections): pieces written in
/// order, each after its pause (a pause lets the connection go idle in the proxy's pool).
pub type Script = fn(usize) -> Vec<(Duration, Vec<u8>)>;

/// The running upstream.
pub struct RawUpstream {
    /// Its port.
    pub port: u16,
    /// Every request head received, in order, across connections.
    heads: Arc<Mutex<Vec<String>>>,
    /// Connections the proxy has closed.
    closed: Arc<AtomicUsize>,
}

impl RawUpstream {
    /// Starts an upstream for `api.test` (certificate from `pki`, ALPN `http/1.1`) that
    /// answers with `script`.
    pub async fn start(pki: &TestPki, script: Script) -> Self {
        let heads = Arc::new(Mutex::new(Vec::new()));
        let closed = Arc::new(AtomicUsize::new(0));
        let (task_heads, task_closed) = (heads.clone(), closed.clone());
        let config = pki.server_config(&["api.test"], &[b"http/1.1"]);
        let listener = TlsListener::start(config, move |mut tls, _| {
            let heads = task_heads.clone();
            let closed = task_closed.clone();
            async move {
                let mut buffer = Vec::new();
                let mut chunk = [0u8; 4096];
                'connection: loop {
                    while let Some(end) = find(&buffer, b"\r\n\r\n") {
                        let head: Vec<u8> = buffer.drain(..end + 4).collect();
                        let number = {
                            let mut heads = heads.lock().expect("heads");
                            heads.push(String::from_utf8_lossy(&head).into_owned());
                            heads.len() - 1
                        };
                        let mut closes = false;
                        for (pause, bytes) in script(number) {
                            tokio::time::sleep(pause).await;
                            closes |= find(&bytes, b"Connection: close\r\n").is_some();
                            if tls.write_all(&bytes).await.is_err() {
                                break;
                            }
                        }
                        let _ = tls.flush().await;
                        // An answer that says `Connection: close` ends its connection: what
                        // frames a body sent to the close.
                        if closes {
                            let _ = tls.shutdown().await;
                            break 'connection;
                        }
                    }
                    match tls.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => buffer.extend_from_slice(&chunk[..n]),
                    }
                }
                closed.fetch_add(1, Ordering::SeqCst);
            }
        })
        .await;
        let port = listener.addr().port();
        Self {
            port,
            heads,
            closed,
        }
    }

    /// Every request head received so far, in order, across connections.
    pub fn heads(&self) -> Vec<String> {
        self.heads.lock().expect("heads").clone()
    }

    /// Waits until the proxy has closed `n` connections (it must notice a response that
    /// answers no request, and drop the connection rather than pair it with the next one).
    ///
    /// # Panics
    ///
    /// After 10 s, naming `what`.
    pub async fn wait_closed(&self, n: usize, what: &str) {
        for _ in 0..200 {
            if self.closed.load(Ordering::SeqCst) >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{what}: the proxy kept a connection that had sent an unasked-for response");
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// A script's answer written in one piece, at once.
pub fn now(bytes: impl Into<Vec<u8>>) -> Vec<(Duration, Vec<u8>)> {
    vec![(Duration::ZERO, bytes.into())]
}

/// A well-formed `200 OK` with `body` and its `Content-Length`.
pub fn ok(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}
