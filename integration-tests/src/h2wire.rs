//! A raw HTTP/2 connection through the proxy to `api.test`: frames written by hand (HPACK
//! blocks by loona-hpack, which encodes whatever it is given, malformed names included),
//! and what came back read by a task into [`Seen`].
//!
//! It follows none of HTTP/2's rules on its own (no flow control, no SETTINGS ACK, no
//! stream state): a test writes whatever frames it likes and looks at what it got.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::client::ProxyAt;
use crate::h2frame as frame;

type TlsStream = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

/// What the proxy sent back on a raw HTTP/2 connection.
#[derive(Debug, Default)]
pub struct Seen {
    /// `:status` per stream.
    pub statuses: Vec<(u32, u16)>,
    /// RST_STREAM error codes per stream.
    pub resets: Vec<(u32, u32)>,
    /// The GOAWAY error code, if one came.
    pub goaway: Option<u32>,
    /// PING acknowledgements.
    pub pongs: usize,
    /// Every DATA payload, concatenated (to look for values).
    pub data: Vec<u8>,
    /// The connection ended.
    pub closed: bool,
    /// Every setting the proxy's SETTINGS frames carried (identifier, value), in order.
    pub settings: Vec<(u16, u32)>,
}

impl Seen {
    /// The `:status` that came on `stream`, if one did.
    pub fn status(&self, stream: u32) -> Option<u16> {
        self.statuses
            .iter()
            .find(|(s, _)| *s == stream)
            .map(|(_, code)| *code)
    }

    /// Whether `stream` was reset.
    pub fn was_reset(&self, stream: u32) -> bool {
        self.resets.iter().any(|(s, _)| *s == stream)
    }
}

/// A raw HTTP/2 connection through the proxy: frames written by hand (HPACK blocks by
/// loona-hpack, which encodes whatever it is given, malformed names included), frames read
/// by a task into [`Seen`].
pub struct H2Wire {
    write: tokio::io::WriteHalf<TlsStream>,
    seen: Arc<Mutex<Seen>>,
    encoder: loona_hpack::Encoder<'static>,
    authority: String,
}

impl H2Wire {
    /// Opens a tunnel to `api.test:port` through `proxy` (ALPN `h2`), writes the client
    /// preface and an empty SETTINGS frame, and starts reading frames into [`Seen`].
    ///
    /// # Panics
    ///
    /// When the tunnel cannot be opened or does not speak `h2`.
    pub async fn open(proxy: &ProxyAt, port: u16) -> Self {
        let tls = proxy
            .tunnel_to("api.test", port, &[b"h2"])
            .await
            .expect("tunnel");
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
        let (mut read, mut write) = tokio::io::split(tls);
        write
            .write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
            .await
            .expect("preface");
        write
            .write_all(&frame::encode(frame::SETTINGS, 0, 0, &[]))
            .await
            .expect("settings");
        let seen = Arc::new(Mutex::new(Seen::default()));
        let task_seen = seen.clone();
        tokio::spawn(async move {
            let mut decoder = loona_hpack::Decoder::new();
            loop {
                let mut head = [0u8; 9];
                if read.read_exact(&mut head).await.is_err() {
                    break;
                }
                let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
                let (kind, flags) = (head[3], head[4]);
                let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
                let mut payload = vec![0u8; len];
                if read.read_exact(&mut payload).await.is_err() {
                    break;
                }
                let mut seen = task_seen.lock().expect("seen");
                match kind {
                    frame::HEADERS => {
                        // The proxy sends neither padding nor priority; one frame per block.
                        let status = decoder.decode(&payload).ok().and_then(|fields| {
                            fields
                                .iter()
                                .find(|(name, _)| name == b":status")
                                .and_then(|(_, v)| std::str::from_utf8(v).ok()?.parse().ok())
                        });
                        if let Some(status) = status {
                            seen.statuses.push((stream, status));
                        }
                    }
                    frame::DATA => seen.data.extend_from_slice(&payload),
                    frame::RST_STREAM if payload.len() == 4 => {
                        let code =
                            u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
                        seen.resets.push((stream, code));
                    }
                    frame::GOAWAY if payload.len() >= 8 => {
                        seen.goaway = Some(u32::from_be_bytes([
                            payload[4], payload[5], payload[6], payload[7],
                        ]));
                    }
                    frame::PING if flags & frame::ACK != 0 => seen.pongs += 1,
                    frame::SETTINGS if flags & frame::ACK == 0 => {
                        seen.settings.extend(payload.chunks_exact(6).map(|s| {
                            (
                                u16::from_be_bytes([s[0], s[1]]),
                                u32::from_be_bytes([s[2], s[3], s[4], s[5]]),
                            )
                        }));
                    }
                    _ => {}
                }
            }
            task_seen.lock().expect("seen").closed = true;
        });
        Self {
            write,
            seen,
            encoder: loona_hpack::Encoder::new(),
            authority: format!("api.test:{port}"),
        }
    }

    /// The usual request pseudo-headers for `path`, then `extra`.
    pub fn request_fields(&self, path: &str, extra: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut fields = vec![
            (":method".to_owned(), "GET".to_owned()),
            (":scheme".to_owned(), "https".to_owned()),
            (":path".to_owned(), path.to_owned()),
            (":authority".to_owned(), self.authority.clone()),
        ];
        fields.extend(extra.iter().map(|(n, v)| (n.to_string(), v.to_string())));
        fields
    }

    /// `fields` as one HPACK block, in order, malformed or not (the encoder's dynamic table
    /// carries over from block to block, as on a real connection).
    pub fn block(&mut self, fields: &[(String, String)]) -> Vec<u8> {
        self.encoder
            .encode(fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())))
    }

    /// Writes bytes; the proxy may already have closed (that is an outcome, not a failure).
    pub async fn send(&mut self, bytes: &[u8]) {
        let _ = self.write.write_all(bytes).await;
        let _ = self.write.flush().await;
    }

    /// A complete header block on `stream`, ending the stream unless `body` follows.
    pub async fn request(&mut self, stream: u32, fields: &[(String, String)], body: Option<&[u8]>) {
        let block = self.block(fields);
        let flags = frame::END_HEADERS | if body.is_none() { frame::END_STREAM } else { 0 };
        let mut bytes = frame::encode(frame::HEADERS, flags, stream, &block);
        if let Some(body) = body {
            bytes.extend(frame::encode(frame::DATA, frame::END_STREAM, stream, body));
        }
        self.send(&bytes).await;
    }

    /// Waits until `done` holds for what was seen, or the connection ended, or 20 s passed.
    pub async fn wait_for(&self, done: impl Fn(&Seen) -> bool) {
        for _ in 0..400 {
            {
                let seen = self.seen.lock().expect("seen");
                if seen.closed || done(&seen) {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sends a plain GET on `stream` and returns its status, or `None` if the connection
    /// ended (or the stream was reset) first.
    pub async fn probe(&mut self, stream: u32) -> Option<u16> {
        let fields = self.request_fields("/probe", &[]);
        self.request(stream, &fields, None).await;
        self.wait_for(|seen| seen.status(stream).is_some() || seen.was_reset(stream))
            .await;
        self.seen.lock().expect("seen").status(stream)
    }

    /// What was seen so far, looked at through `look`.
    pub fn seen<T>(&self, look: impl FnOnce(&Seen) -> T) -> T {
        look(&self.seen.lock().expect("seen"))
    }
}
