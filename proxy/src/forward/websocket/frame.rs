//! WebSocket frames on one leg: read whole from a byte stream, written whole to one.
//! tungstenite's frame codec parses and formats the headers; this module owns buffering,
//! the payload bound and which side masks.
//!
//! Toward the client sluice is the server: the client's frames must be masked and sluice's
//! are not. Toward the upstream sluice is the client, and masks every frame with a fresh
//! random key (RFC 6455 section 5.3). A frame masked the wrong way is a protocol error.

use std::io::{Cursor, IoSlice};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tungstenite::protocol::frame::FrameHeader;
use tungstenite::protocol::frame::coding::OpCode;

use super::Close;

/// The most buffer room a frame being received is given ahead of its bytes.
const READ_AHEAD: usize = 64 * 1024;

/// Which peer a leg faces, and so who masks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Peer {
    /// The sandboxed client: its frames arrive masked, sluice's leave unmasked.
    Client,
    /// The upstream: its frames arrive unmasked, sluice's leave masked.
    Upstream,
}

/// Reads whole frames, unmasked, from one leg.
pub(super) struct FrameReader<R> {
    io: R,
    buf: BytesMut,
    peer: Peer,
    /// The largest payload a frame may declare; a larger one closes with `1009`.
    max_payload: usize,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    pub(super) fn new(io: R, peer: Peer, max_payload: usize) -> Self {
        Self {
            io,
            buf: BytesMut::with_capacity(16 * 1024),
            peer,
            max_payload,
        }
    }

    /// The next frame's header and unmasked payload; `None` when the leg closed cleanly
    /// between frames.
    ///
    /// # Errors
    ///
    /// The close to send: a malformed header, a frame masked the wrong way, a payload over
    /// the bound, or a stream cut inside a frame.
    pub(super) async fn next(&mut self) -> Result<Option<(FrameHeader, BytesMut)>, Close> {
        loop {
            if let Some(frame) = self.parse()? {
                return Ok(Some(frame));
            }
            let read = self
                .io
                .read_buf(&mut self.buf)
                .await
                .map_err(|e| Close::gone(&format!("reading failed: {e}")))?;
            if read == 0 {
                return if self.buf.is_empty() {
                    Ok(None)
                } else {
                    Err(Close::gone("the connection closed inside a frame"))
                };
            }
        }
    }

    /// A whole frame from the buffer, if it holds one.
    fn parse(&mut self) -> Result<Option<(FrameHeader, BytesMut)>, Close> {
        let mut cursor = Cursor::new(&self.buf[..]);
        let Some((header, length)) =
            FrameHeader::parse(&mut cursor).map_err(|e| Close::protocol(&e.to_string()))?
        else {
            return Ok(None);
        };
        let head = usize::try_from(cursor.position()).unwrap_or(usize::MAX);
        let length = usize::try_from(length).unwrap_or(usize::MAX);
        if length > self.max_payload {
            return Err(Close::too_big(self.max_payload));
        }
        match (self.peer, header.mask.is_some()) {
            (Peer::Client, false) => return Err(Close::protocol("a client frame is not masked")),
            (Peer::Upstream, true) => return Err(Close::protocol("a server frame is masked")),
            _ => {}
        }
        if self.buf.len() - head < length {
            // Room for what has to come, a read at a time: a header alone must not make
            // sluice hold its declared length (a peer could declare the bound on each of
            // many streams and send nothing after).
            self.buf
                .reserve((head + length - self.buf.len()).min(READ_AHEAD));
            return Ok(None);
        }
        self.buf.advance(head);
        let mut payload = self.buf.split_to(length);
        if let Some(mask) = header.mask {
            apply_mask(&mut payload, mask);
        }
        Ok(Some((header, payload)))
    }
}

/// XORs `payload` with the 4-byte `mask`, as RFC 6455 section 5.3 masks and unmasks.
fn apply_mask(payload: &mut [u8], mask: [u8; 4]) {
    let word = u32::from_ne_bytes(mask);
    let mut chunks = payload.chunks_exact_mut(4);
    for chunk in &mut chunks {
        let masked = u32::from_ne_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]) ^ word;
        chunk.copy_from_slice(&masked.to_ne_bytes());
    }
    for (byte, key) in chunks.into_remainder().iter_mut().zip(mask) {
        *byte ^= key;
    }
}

/// Writes whole frames to one leg, masked when it faces the upstream.
///
/// A payload is written from the caller's buffer (masked there in place, toward the
/// upstream), never copied: the caller's buffer type decides whether it is wiped.
pub(super) struct FrameWriter<W> {
    io: W,
    peer: Peer,
    /// How long one frame may take to be written (a peer that stops reading).
    timeout: Duration,
    /// The frame header being written (at most 14 bytes; a mask key is no secret).
    head: Vec<u8>,
}

impl<W: AsyncWrite + Unpin> FrameWriter<W> {
    pub(super) fn new(io: W, peer: Peer, timeout: Duration) -> Self {
        Self {
            io,
            peer,
            timeout,
            head: Vec::with_capacity(14),
        }
    }

    /// Writes one final frame of `opcode` carrying `payload`, and flushes it: a WebSocket
    /// is interactive, nothing waits for more. Toward the upstream `payload` is left
    /// masked.
    ///
    /// # Errors
    ///
    /// The write's error, or `TimedOut` when the frame took longer than the timeout.
    pub(super) async fn send(&mut self, opcode: OpCode, payload: &mut [u8]) -> std::io::Result<()> {
        let timeout = self.timeout;
        tokio::time::timeout(timeout, self.write_frame(opcode, payload))
            .await
            .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into()))
    }

    async fn write_frame(&mut self, opcode: OpCode, payload: &mut [u8]) -> std::io::Result<()> {
        let mut header = FrameHeader {
            opcode,
            ..FrameHeader::default()
        };
        if self.peer == Peer::Upstream {
            let mut key = [0u8; 4];
            getrandom::fill(&mut key).map_err(std::io::Error::other)?;
            header.mask = Some(key);
            apply_mask(payload, key);
        }
        self.head.clear();
        header
            .format(payload.len() as u64, &mut self.head)
            .map_err(std::io::Error::other)?;
        // Header and payload in one write, so that TLS can carry them in one record.
        let mut parts = [IoSlice::new(&self.head), IoSlice::new(payload)];
        let mut unsent = &mut parts[..];
        while !unsent.is_empty() {
            let wrote = self.io.write_vectored(unsent).await?;
            if wrote == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            IoSlice::advance_slices(&mut unsent, wrote);
        }
        self.io.flush().await
    }

    /// Closes the write side.
    pub(super) async fn shutdown(&mut self) {
        let _ = self.io.shutdown().await;
    }
}

#[cfg(test)]
mod tests {
    use tungstenite::protocol::frame::coding::Data;

    use super::*;

    #[tokio::test]
    async fn a_header_declaring_a_large_payload_reserves_a_read_ahead_not_its_length() {
        const LEN: usize = 1 << 20;
        let mask = [9, 8, 7, 6];
        // A masked client frame header declaring 1 MiB, its payload held back at first.
        let mut head = vec![0x82, 0x80 | 127];
        head.extend_from_slice(&(LEN as u64).to_be_bytes());
        head.extend_from_slice(&mask);
        let (mut peer, io) = tokio::io::duplex(64 * 1024);
        peer.write_all(&head).await.unwrap();
        let mut reader = FrameReader::new(io, Peer::Client, 16 << 20);
        let read = tokio::time::timeout(std::time::Duration::from_millis(50), reader.next()).await;
        assert!(read.is_err(), "a frame with no payload yet is not whole");
        assert!(
            reader.buf.capacity() <= 2 * READ_AHEAD,
            "{} bytes held for a payload not sent",
            reader.buf.capacity()
        );
        // The payload, once it comes, completes the frame.
        let mut payload = vec![0x5a; LEN];
        apply_mask(&mut payload, mask);
        let sender = tokio::spawn(async move { peer.write_all(&payload).await });
        let (header, payload) = reader.next().await.unwrap().unwrap();
        sender.await.unwrap().unwrap();
        assert_eq!(header.opcode, OpCode::Data(Data::Binary));
        assert_eq!(payload.len(), LEN);
        assert!(payload.iter().all(|&b| b == 0x5a));
    }

    #[tokio::test]
    async fn a_peer_that_stops_reading_times_the_write_out() {
        // Room for 64 bytes, and nobody reading them.
        let (_peer, io) = tokio::io::duplex(64);
        let mut writer = FrameWriter::new(io, Peer::Client, Duration::from_millis(50));
        let mut small = *b"fits";
        writer
            .send(OpCode::Data(Data::Text), &mut small)
            .await
            .unwrap();
        let mut large = vec![b'x'; 4096];
        let error = writer
            .send(OpCode::Data(Data::Binary), &mut large)
            .await
            .unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::TimedOut);
    }

    #[test]
    fn unmasking_twice_gives_the_payload_back_at_every_length() {
        let mask = [0x37, 0xfa, 0x21, 0x3d];
        for len in 0..13 {
            let original: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut bytes = original.clone();
            apply_mask(&mut bytes, mask);
            if len > 0 {
                assert_ne!(bytes, original);
                assert_eq!(bytes[0], mask[0]);
            }
            apply_mask(&mut bytes, mask);
            assert_eq!(bytes, original);
        }
    }
}
