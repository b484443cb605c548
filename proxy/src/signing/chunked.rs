//! An aws-chunked request body through sluice: unframed and its chunk signatures checked on
//! the way in ([`Unchunk`]), scanned as plain data by the request's rewriter like any body,
//! then framed again on the way out with a signature by the real key on every chunk
//! ([`Rechunk`]).
//!
//! Streamed, never read whole: a signed chunk is held until its signature by the
//! placeholder key is checked (nothing of it reaches the scanner or the real key before),
//! and each chunk goes out as soon as the scanner has released all of it. The chunks go out
//! with the client's own sizes, written as the client wrote them, so `Content-Length` and
//! `x-amz-decoded-content-length` (both usually signed) still hold; the scan may therefore
//! only keep or refuse, never change a byte (the body step's length-keeping plan).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

use bytes::{Bytes, BytesMut};
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;
use sluice_sign::aws_sigv4::chunked::{ChunkChain, ChunkError, Mode, Piece, Unframer};

use crate::body::{Body, BoxError};
use crate::refusal::Refusal;

/// What the way in tells the way out: each chunk's size as the client wrote it, in order,
/// and the trailers after the last.
#[derive(Default)]
pub(crate) struct Framing {
    sizes: VecDeque<(u64, String)>,
    trailers: Vec<String>,
}

/// Shared between one body's [`Unchunk`] and [`Rechunk`].
pub(crate) type SharedFraming = Arc<Mutex<Framing>>;

fn lock(framing: &SharedFraming) -> std::sync::MutexGuard<'_, Framing> {
    framing.lock().unwrap_or_else(|e| e.into_inner())
}

/// Why an aws-chunked body was stopped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ChunkedError {
    /// The framing is broken.
    #[error("{0}")]
    Framing(#[from] ChunkError),
    /// A chunk's signature is not the placeholder key's.
    #[error("an aws-chunked chunk's signature does not verify with the placeholder key")]
    Signature,
    /// The data's length is not `x-amz-decoded-content-length`.
    #[error(
        "the aws-chunked body holds {found} bytes of data, not the {declared} its x-amz-decoded-content-length says"
    )]
    DecodedLength {
        /// The declared length.
        declared: u64,
        /// What arrived.
        found: u64,
    },
    /// The scan changed the data's length (it may only keep or refuse).
    #[error("the aws-chunked body's data changed length on its way through sluice")]
    LengthChanged,
    /// The signer refused a chunk.
    #[error("an aws-chunked chunk cannot be signed")]
    Unsignable,
}

/// The refusal an aws-chunked body's failure on the way in is answered with: a chunk
/// signature that does not verify is the signer's refusal; broken framing a bad request.
pub(crate) fn refusal(secret: &str, error: &(dyn std::error::Error + 'static)) -> Refusal {
    match error.downcast_ref::<ChunkedError>() {
        Some(ChunkedError::Signature) => {
            Refusal::signature_invalid(secret, &ChunkedError::Signature)
        }
        Some(other) => Refusal::bad_request(other.to_string()),
        None => Refusal::bad_request("the request body did not arrive whole"),
    }
}

/// The way in: aws-chunked bytes from the client, plain data out.
pub(crate) struct Unchunk {
    inner: Incoming,
    unframer: Unframer,
    /// The placeholder key's chain, in signed mode.
    chain: Option<ChunkChain>,
    claimed: Option<String>,
    chunk: BytesMut,
    ready: VecDeque<Bytes>,
    declared: u64,
    framing: SharedFraming,
    ended: bool,
}

impl Unchunk {
    /// Reads `inner` as `mode` framing, checking each chunk with `chain` (signed mode), its
    /// chunks at most `max_chunk` bytes and its data `declared` bytes in all.
    pub(crate) fn new(
        inner: Incoming,
        mode: Mode,
        chain: Option<ChunkChain>,
        max_chunk: u64,
        declared: u64,
        framing: SharedFraming,
    ) -> Self {
        Self {
            inner,
            unframer: Unframer::new(mode, max_chunk),
            chain,
            claimed: None,
            chunk: BytesMut::new(),
            ready: VecDeque::new(),
            declared,
            framing,
            ended: false,
        }
    }

    fn take(&mut self, pieces: Vec<Piece>) -> Result<(), ChunkedError> {
        for piece in pieces {
            match piece {
                Piece::Chunk {
                    size,
                    size_text,
                    signature,
                } => {
                    self.claimed = signature;
                    lock(&self.framing).sizes.push_back((size, size_text));
                }
                Piece::Data(data) => match self.chain {
                    // Held until the chunk's signature is checked.
                    Some(_) => self.chunk.extend_from_slice(&data),
                    None => self.ready.push_back(Bytes::from(data)),
                },
                Piece::ChunkEnd => {
                    if let Some(chain) = &mut self.chain {
                        let data = std::mem::take(&mut self.chunk).freeze();
                        let claimed = self.claimed.take().unwrap_or_default();
                        chain
                            .check(&data, &claimed)
                            .map_err(|_| ChunkedError::Signature)?;
                        if !data.is_empty() {
                            self.ready.push_back(data);
                        }
                    }
                }
                Piece::Trailer(line) => lock(&self.framing).trailers.push(line),
            }
        }
        Ok(())
    }
}

impl HttpBody for Unchunk {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        loop {
            if let Some(data) = this.ready.pop_front() {
                return Poll::Ready(Some(Ok(Frame::data(data))));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                Some(Ok(frame)) => {
                    // HTTP trailers carry nothing here: aws-chunked trailers are inline.
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    let mut pieces = Vec::new();
                    let read = this
                        .unframer
                        .push(&data, &mut pieces)
                        .map_err(ChunkedError::from)
                        .and_then(|()| this.take(pieces));
                    if let Err(error) = read {
                        this.ended = true;
                        return Poll::Ready(Some(Err(Box::new(error))));
                    }
                }
                Some(Err(error)) => return Poll::Ready(Some(Err(Box::new(error)))),
                None => {
                    this.ended = true;
                    let found = this.unframer.decoded();
                    let end = this
                        .unframer
                        .finish()
                        .map_err(ChunkedError::from)
                        .and_then(|()| {
                            if found == this.declared {
                                Ok(())
                            } else {
                                Err(ChunkedError::DecodedLength {
                                    declared: this.declared,
                                    found,
                                })
                            }
                        });
                    if let Err(error) = end {
                        return Poll::Ready(Some(Err(Box::new(error))));
                    }
                }
            }
        }
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

/// The way out: scanned data in, aws-chunked bytes out, each chunk of the client's size and
/// (in signed mode) signed by the real key.
pub(crate) struct Rechunk {
    inner: Body,
    chain: Option<ChunkChain>,
    data: BytesMut,
    framing: SharedFraming,
    inner_ended: bool,
    done: bool,
}

impl Rechunk {
    /// Frames `inner` again as the client framed it, signing with `chain` (signed mode,
    /// seeded with the request's signature by the real key).
    pub(crate) fn new(inner: Body, chain: Option<ChunkChain>, framing: SharedFraming) -> Self {
        Self {
            inner,
            chain,
            data: BytesMut::new(),
            framing,
            inner_ended: false,
            done: false,
        }
    }

    /// The next chunk, framed, when its data is all here; at the end, the last chunk and
    /// the trailers.
    fn next_chunk(&mut self) -> Result<Option<Bytes>, ChunkedError> {
        let mut framing = lock(&self.framing);
        let Some((size, size_text)) = framing.sizes.front().cloned() else {
            return if self.inner_ended && !self.data.is_empty() {
                Err(ChunkedError::LengthChanged)
            } else {
                Ok(None)
            };
        };
        let size = usize::try_from(size).map_err(|_| ChunkedError::LengthChanged)?;
        if size == 0 && !self.inner_ended {
            return Ok(None);
        }
        if size == 0 && !self.data.is_empty() {
            return Err(ChunkedError::LengthChanged);
        }
        if self.data.len() < size {
            return if self.inner_ended {
                Err(ChunkedError::LengthChanged)
            } else {
                Ok(None)
            };
        }
        framing.sizes.pop_front();
        let data = self.data.split_to(size).freeze();
        let mut out = BytesMut::with_capacity(size + 100);
        out.extend_from_slice(size_text.as_bytes());
        if let Some(chain) = &mut self.chain {
            let signature = chain.sign(&data).map_err(|_| ChunkedError::Unsignable)?;
            out.extend_from_slice(b";chunk-signature=");
            out.extend_from_slice(signature.as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&data);
        if size > 0 {
            out.extend_from_slice(b"\r\n");
        } else {
            for trailer in &framing.trailers {
                out.extend_from_slice(trailer.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"\r\n");
            self.done = true;
        }
        Ok(Some(out.freeze()))
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
            if this.done {
                return Poll::Ready(None);
            }
            match this.next_chunk() {
                Ok(Some(chunk)) => return Poll::Ready(Some(Ok(Frame::data(chunk)))),
                Ok(None) if this.inner_ended => {
                    // Ended with no last chunk recorded: the way in failed, and said so.
                    this.done = true;
                    return Poll::Ready(None);
                }
                Ok(None) => {}
                Err(error) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(Box::new(error))));
                }
            }
            match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        this.data.extend_from_slice(&data);
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
