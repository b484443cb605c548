//! What a captured connection opens with, and the name a TLS one asks for: the server name
//! (SNI) of its ClientHello,
//! read by rustls's own parser from bytes peeked, not consumed, so that the handshake then
//! runs from its first byte on the CONNECT path as if nothing had looked.
//!
//! What it must never do: take a name from anything but a ClientHello rustls accepts, or
//! wait for one past the handshake timeout.

use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::Instant;

/// The most a ClientHello may take before it is given up on (far above what clients send,
/// post-quantum key shares included).
const MAX_HELLO: usize = 64 * 1024;

/// What is peeked first: a ClientHello with post-quantum key shares is under 2 KiB.
const FIRST_PEEK: usize = 4 * 1024;

/// What waits on `stream`: a ClientHello (naming a server or not), something else (a
/// plain request), or nothing within `timeout`.
pub(crate) async fn client_hello(stream: &TcpStream, timeout: Duration) -> Hello {
    let deadline = Instant::now() + timeout;
    // Most ClientHellos fit the first size; the buffer grows only for one that does not.
    let mut buffer = vec![0u8; FIRST_PEEK];
    let mut seen = 0;
    loop {
        let peeked = match tokio::time::timeout_at(deadline, stream.peek(&mut buffer)).await {
            Ok(Ok(0) | Err(_)) | Err(_) => return Hello::Silent,
            Ok(Ok(peeked)) => peeked,
        };
        if peeked > seen {
            seen = peeked;
            match parse(&buffer[..peeked]) {
                Hello::Partial if peeked == MAX_HELLO => return Hello::NotTls,
                Hello::Partial if peeked == buffer.len() => {
                    buffer.resize((buffer.len() * 2).min(MAX_HELLO), 0);
                    continue;
                }
                Hello::Partial => {}
                decided => return decided,
            }
        }
        // Part of a ClientHello is here: the rest follows (peek would return at once).
        if Instant::now() >= deadline {
            return Hello::Silent;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// What the bytes so far are.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Hello {
    /// A ClientHello naming this server.
    Named(String),
    /// A ClientHello without a server name.
    Unnamed,
    /// The start of a ClientHello.
    Partial,
    /// Not TLS, or not a ClientHello rustls accepts.
    NotTls,
    /// Nothing, or not all of a ClientHello, before the timeout or the end.
    Silent,
}

fn parse(mut bytes: &[u8]) -> Hello {
    let mut acceptor = rustls::server::Acceptor::default();
    while !bytes.is_empty() {
        match acceptor.read_tls(&mut bytes) {
            Ok(0) => break,
            Ok(_) => {}
            Err(_) => return Hello::NotTls,
        }
    }
    match acceptor.accept() {
        Ok(Some(accepted)) => match accepted.client_hello().server_name() {
            Some(name) => Hello::Named(name.to_owned()),
            None => Hello::Unnamed,
        },
        Ok(None) => Hello::Partial,
        Err(_) => Hello::NotTls,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real ClientHello, as rustls's client writes it for `name`.
    fn hello_bytes(name: &str) -> Vec<u8> {
        hello_bytes_with(name, |_| {})
    }

    /// As [`hello_bytes`], the client configured by `adjust` first.
    fn hello_bytes_with(name: &str, adjust: impl FnOnce(&mut rustls::ClientConfig)) -> Vec<u8> {
        let provider = std::sync::Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        let mut config = config;
        adjust(&mut config);
        let server = rustls_pki_types::ServerName::try_from(name.to_owned()).unwrap();
        let mut client =
            rustls::ClientConnection::new(std::sync::Arc::new(config), server).unwrap();
        let mut bytes = Vec::new();
        client.write_tls(&mut bytes).unwrap();
        bytes
    }

    #[test]
    fn a_client_hello_gives_its_server_name_and_only_a_whole_one_does() {
        let hello = hello_bytes("api.example.com");
        assert_eq!(parse(&hello), Hello::Named("api.example.com".into()));
        // Cut anywhere, it is the start of one: nothing is decided on a part.
        for cut in [1, 5, 6, hello.len() / 2, hello.len() - 1] {
            assert_eq!(parse(&hello[..cut]), Hello::Partial, "cut at {cut}");
        }
    }

    #[test]
    fn an_address_or_plain_text_names_nothing() {
        // rustls sends no SNI for an IP address.
        assert_eq!(parse(&hello_bytes("127.0.0.1")), Hello::Unnamed);
        assert_eq!(
            parse(b"GET / HTTP/1.1\r\nHost: api.example.com\r\n\r\n"),
            Hello::NotTls
        );
    }

    #[tokio::test]
    async fn a_hello_sent_in_pieces_is_read_whole_and_left_unread() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let hello = hello_bytes("api.example.com");
        let sent = hello.clone();
        let client = tokio::spawn(async move {
            let mut stream = TcpStream::connect(address).await.unwrap();
            stream.set_nodelay(true).unwrap();
            let (first, rest) = sent.split_at(7);
            stream.write_all(first).await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
            stream.write_all(rest).await.unwrap();
            stream
        });
        let (mut stream, _) = listener.accept().await.unwrap();
        let seen = client_hello(&stream, Duration::from_secs(5)).await;
        assert_eq!(seen, Hello::Named("api.example.com".into()));
        // Nothing was consumed: the handshake still starts at the first byte.
        let mut read = vec![0u8; hello.len()];
        stream.read_exact(&mut read).await.unwrap();
        assert_eq!(read, hello);
        drop(client.await.unwrap());
    }

    #[tokio::test]
    async fn a_hello_larger_than_the_first_peek_is_read_whole() {
        // Many long ALPN names push the hello past the first peek's size.
        let hello = hello_bytes_with("api.example.com", |config| {
            config.alpn_protocols = (0..40u8).map(|i| vec![b'a' + i % 26; 200]).collect();
        });
        assert!(hello.len() > FIRST_PEEK, "{}", hello.len());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        tokio::io::AsyncWriteExt::write_all(&mut client, &hello)
            .await
            .unwrap();
        let (stream, _) = listener.accept().await.unwrap();
        let seen = client_hello(&stream, Duration::from_secs(5)).await;
        assert_eq!(seen, Hello::Named("api.example.com".into()));
    }

    #[tokio::test]
    async fn a_plain_request_is_told_apart_at_once() {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let mut client = TcpStream::connect(address).await.unwrap();
        client
            .write_all(b"GET / HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
            .await
            .unwrap();
        let (stream, _) = listener.accept().await.unwrap();
        let seen = client_hello(&stream, Duration::from_secs(5)).await;
        assert_eq!(seen, Hello::NotTls);
    }

    #[tokio::test]
    async fn a_silent_connection_is_given_up_on_at_the_timeout() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let _client = TcpStream::connect(address).await.unwrap();
        let (stream, _) = listener.accept().await.unwrap();
        let hello = client_hello(&stream, Duration::from_millis(50)).await;
        assert_eq!(hello, Hello::Silent);
    }
}
