//! The way out: scanned data in, aws-chunked bytes out, each chunk of the client's size
//! and, for signed chunks, signed by the real key over the digest the way in checked; then
//! the trailers as they came, with the real key's trailer signature where they are signed.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Bytes, BytesMut};
use http_body::{Body as HttpBody, Frame, SizeHint};
use sluice_sign::aws_sigv4::chunked::{ChunkChain, Mode};

use super::{ChunkedError, SharedFraming, lock};
use crate::body::{Body, BoxError};

/// Scanned data in, framed (and signed) aws-chunked bytes out.
pub(crate) struct Rechunk {
    inner: Body,
    mode: Mode,
    chain: Option<ChunkChain>,
    /// Data from the scan not yet framed, as it came (never copied to be framed).
    pending: VecDeque<Bytes>,
    pending_len: usize,
    /// Framed pieces ready to go (a chunk's line, its data, its CRLF).
    out: VecDeque<Bytes>,
    framing: SharedFraming,
    inner_ended: bool,
    done: bool,
}

impl Rechunk {
    /// Frames `inner` again as the client framed it in `mode`, signing with `chain`
    /// (signed modes, seeded with the request's signature by the real key).
    pub(crate) fn new(
        inner: Body,
        mode: Mode,
        chain: Option<ChunkChain>,
        framing: SharedFraming,
    ) -> Self {
        Self {
            inner,
            mode,
            chain,
            pending: VecDeque::new(),
            pending_len: 0,
            out: VecDeque::new(),
            framing,
            inner_ended: false,
            done: false,
        }
    }

    /// The first `size` bytes of the pending data, as slices.
    fn take_pending(&mut self, size: usize) -> Vec<Bytes> {
        let mut parts = Vec::new();
        let mut left = size;
        while left > 0 {
            let Some(mut part) = self.pending.pop_front() else {
                break;
            };
            if part.len() > left {
                self.pending.push_front(part.split_off(left));
            }
            left -= part.len();
            parts.push(part);
        }
        self.pending_len -= size - left;
        parts
    }

    /// Frames the next chunk into `out` when its data is all here (at the end, the last
    /// chunk and the trailers); whether it did.
    fn next_chunk(&mut self) -> Result<bool, ChunkedError> {
        let framing = self.framing.clone();
        let mut framing = lock(&framing);
        let Some(chunk) = framing.chunks.front() else {
            return if self.inner_ended && self.pending_len > 0 {
                Err(ChunkedError::LengthChanged)
            } else {
                Ok(false)
            };
        };
        let size = usize::try_from(chunk.size).map_err(|_| ChunkedError::LengthChanged)?;
        if size == 0 && !self.inner_ended {
            return Ok(false);
        }
        if size == 0 && self.pending_len > 0 {
            return Err(ChunkedError::LengthChanged);
        }
        if self.pending_len < size {
            return if self.inner_ended {
                Err(ChunkedError::LengthChanged)
            } else {
                Ok(false)
            };
        }
        let Some(chunk) = framing.chunks.pop_front() else {
            return Ok(false);
        };
        let parts = self.take_pending(size);
        let mut line = BytesMut::with_capacity(chunk.size_text.len() + 100);
        line.extend_from_slice(chunk.size_text.as_bytes());
        if let Some(chain) = &mut self.chain {
            // The digest the placeholder key's signature was checked over: the real key
            // signs what the client signed, never more.
            let digest = chunk.digest.ok_or(ChunkedError::Unsignable)?;
            debug_assert_eq!(
                {
                    let mut hasher = sluice_sign::aws_sigv4::chunked::ChunkHasher::new();
                    parts.iter().for_each(|p| hasher.update(p));
                    hasher.finish()
                },
                digest,
                "the scan changed a signed chunk's bytes"
            );
            line.extend_from_slice(b";chunk-signature=");
            line.extend_from_slice(chain.sign_digest(&digest).as_bytes());
        }
        line.extend_from_slice(b"\r\n");
        if size > 0 {
            self.out.push_back(line.freeze());
            self.out.extend(parts);
            self.out.push_back(Bytes::from_static(b"\r\n"));
            return Ok(true);
        }
        for trailer in &framing.trailers {
            line.extend_from_slice(trailer.as_bytes());
            line.extend_from_slice(b"\r\n");
        }
        if self.mode == Mode::SignedTrailer {
            let chain = self.chain.as_mut().ok_or(ChunkedError::Unsignable)?;
            let signature = chain
                .sign_trailer(&framing.trailers)
                .map_err(|_| ChunkedError::Unsignable)?;
            line.extend_from_slice(b"x-amz-trailer-signature:");
            line.extend_from_slice(signature.as_bytes());
            line.extend_from_slice(b"\r\n");
        }
        line.extend_from_slice(b"\r\n");
        self.out.push_back(line.freeze());
        self.done = true;
        Ok(true)
    }
}

impl HttpBody for Rechunk {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        loop {
            if let Some(piece) = this.out.pop_front() {
                return Poll::Ready(Some(Ok(Frame::data(piece))));
            }
            if this.done {
                return Poll::Ready(None);
            }
            match this.next_chunk() {
                Ok(true) => continue,
                Ok(false) if this.inner_ended => {
                    // Ended with no last chunk recorded: the way in failed, and said so.
                    this.done = true;
                    return Poll::Ready(None);
                }
                Ok(false) => {}
                Err(error) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(Box::new(error))));
                }
            }
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data()
                        && !data.is_empty()
                    {
                        this.pending_len += data.len();
                        this.pending.push_back(data);
                    }
                }
                Some(Err(error)) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(error)));
                }
                None => this.inner_ended = true,
            }
        }
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}
