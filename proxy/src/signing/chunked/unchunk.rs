//! The way in: aws-chunked bytes from the client, plain data out, each signed chunk held
//! until the placeholder key's signature over it is checked, and signed trailers checked
//! against `x-amz-trailer` and their signature before the body is allowed to end.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue};
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;
use sluice_sign::aws_sigv4::chunked::{
    ChunkChain, ChunkHasher, Mode, Piece, Unframer, announced_trailers,
};

use super::{ChunkedError, FramedChunk, SharedFraming, lock};
use crate::body::BoxError;

/// aws-chunked bytes in, the data out.
pub(crate) struct Unchunk<B = Incoming> {
    inner: B,
    unframer: Unframer,
    /// The placeholder key's chain, for signed chunks.
    chain: Option<ChunkChain>,
    /// The current signed chunk: its claimed signature, its hash so far, and its data as it
    /// arrived (slices of the input, not copies).
    claimed: Option<String>,
    hasher: ChunkHasher,
    held: Vec<Bytes>,
    ready: VecDeque<Bytes>,
    declared: u64,
    /// `x-amz-trailer`, which signed trailers must match.
    announced: Option<String>,
    framing: SharedFraming,
    ended: bool,
}

impl<B> Unchunk<B> {
    /// Reads `inner` as `mode` framing, checking each chunk with `chain` (signed modes),
    /// its chunks at most `max_chunk` bytes, its data `declared` bytes in all and its
    /// signed trailers the ones `announced`.
    pub(crate) fn new(
        inner: B,
        mode: Mode,
        chain: Option<ChunkChain>,
        max_chunk: u64,
        declared: u64,
        announced: Option<String>,
        framing: SharedFraming,
    ) -> Self {
        Self {
            inner,
            unframer: Unframer::new(mode, max_chunk),
            chain,
            claimed: None,
            hasher: ChunkHasher::new(),
            held: Vec::new(),
            ready: VecDeque::new(),
            declared,
            announced,
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
                    lock(&self.framing).chunks.push_back(FramedChunk {
                        size,
                        size_text,
                        digest: None,
                    });
                }
                Piece::Data(data) => match self.chain {
                    // Held until the chunk's signature is checked; hashed as it arrives.
                    Some(_) => {
                        self.hasher.update(&data);
                        self.held.push(data);
                    }
                    None => self.ready.push_back(data),
                },
                Piece::ChunkEnd => {
                    if let Some(chain) = &mut self.chain {
                        let digest = std::mem::take(&mut self.hasher).finish();
                        let claimed = self.claimed.take().unwrap_or_default();
                        chain
                            .check_digest(&digest, &claimed)
                            .map_err(|_| ChunkedError::Signature)?;
                        if let Some(chunk) = lock(&self.framing).chunks.back_mut() {
                            chunk.digest = Some(digest);
                        }
                        self.ready
                            .extend(self.held.drain(..).filter(|d| !d.is_empty()));
                    }
                }
                Piece::Trailer(line) => lock(&self.framing).trailers.push(line),
                Piece::TrailerSignature(claimed) => {
                    let trailers = lock(&self.framing).trailers.clone();
                    announced_trailers(self.announced.as_deref(), &trailers)
                        .map_err(|_| ChunkedError::Unannounced)?;
                    self.chain
                        .as_mut()
                        .ok_or(ChunkedError::TrailerSignature)?
                        .check_trailer(&trailers, &claimed)
                        .map_err(|_| ChunkedError::TrailerSignature)?;
                }
            }
        }
        Ok(())
    }

    /// The trailers that came after the last chunk, as header fields for the scan, once
    /// checked against `x-amz-trailer` (signed ones were at their signature; unsigned ones
    /// are here); `None` for a body without trailers.
    fn trailers(&self) -> Result<Option<HeaderMap>, ChunkedError> {
        let lines = lock(&self.framing).trailers.clone();
        if lines.is_empty() && self.announced.is_none() {
            return Ok(None);
        }
        announced_trailers(self.announced.as_deref(), &lines)
            .map_err(|_| ChunkedError::Unannounced)?;
        let mut fields = HeaderMap::with_capacity(lines.len());
        for line in &lines {
            let (name, value) = line.split_once(':').ok_or(ChunkedError::TrailerField)?;
            let name = HeaderName::from_bytes(name.trim().as_bytes())
                .map_err(|_| ChunkedError::TrailerField)?;
            let value =
                HeaderValue::from_str(value.trim()).map_err(|_| ChunkedError::TrailerField)?;
            fields.append(name, value);
        }
        Ok(Some(fields))
    }

    /// A framing error, named for the kind of body it broke.
    fn framing_error(&self, error: sluice_sign::aws_sigv4::chunked::ChunkError) -> ChunkedError {
        if self.chain.is_some() {
            ChunkedError::SignedFraming(error)
        } else {
            ChunkedError::Framing(error)
        }
    }
}

impl<B> HttpBody for Unchunk<B>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
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
                    let read = match this.unframer.push(&data, &mut pieces) {
                        Ok(()) => this.take(pieces),
                        Err(error) => Err(this.framing_error(error)),
                    };
                    if let Err(error) = read {
                        this.ended = true;
                        return Poll::Ready(Some(Err(Box::new(error))));
                    }
                }
                Some(Err(error)) => return Poll::Ready(Some(Err(error.into()))),
                None => {
                    this.ended = true;
                    let found = this.unframer.decoded();
                    let declared = this.declared;
                    let end = match this.unframer.finish() {
                        Err(error) => Err(this.framing_error(error)),
                        Ok(()) if found != declared => {
                            Err(ChunkedError::DecodedLength { declared, found })
                        }
                        Ok(()) => this.trailers(),
                    };
                    match end {
                        Err(error) => return Poll::Ready(Some(Err(Box::new(error)))),
                        // The trailers go on to the scan as HTTP trailers, which it weighs
                        // like any (a placeholder or a known value in one is refused); the
                        // way out writes them as they came.
                        Ok(Some(trailers)) => {
                            return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
                        }
                        Ok(None) => {}
                    }
                }
            }
        }
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}
