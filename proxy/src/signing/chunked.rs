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
pub(crate) struct Unchunk<B = Incoming> {
    inner: B,
    unframer: Unframer,
    /// The placeholder key's chain, in signed mode.
    chain: Option<ChunkChain>,
    claimed: Option<String>,
    /// The current signed chunk's data as it arrived, in slices of the input.
    chunk: Vec<Bytes>,
    ready: VecDeque<Bytes>,
    declared: u64,
    framing: SharedFraming,
    ended: bool,
}

impl<B> Unchunk<B> {
    /// Reads `inner` as `mode` framing, checking each chunk with `chain` (signed mode), its
    /// chunks at most `max_chunk` bytes and its data `declared` bytes in all.
    pub(crate) fn new(
        inner: B,
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
            chunk: Vec::new(),
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
                    Some(_) => self.chunk.push(data),
                    None => self.ready.push_back(data),
                },
                Piece::ChunkEnd => {
                    if let Some(chain) = &mut self.chain {
                        let data = joined(std::mem::take(&mut self.chunk));
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
                Some(Err(error)) => return Poll::Ready(Some(Err(error.into()))),
                None => {
                    this.ended = true;
                    let found = this.unframer.decoded();
                    let declared = this.declared;
                    let end = this
                        .unframer
                        .finish()
                        .map_err(ChunkedError::from)
                        .and_then(|()| {
                            (found == declared)
                                .then_some(())
                                .ok_or(ChunkedError::DecodedLength { declared, found })
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

/// One contiguous buffer of `parts` (no copy when there is one).
fn joined(mut parts: Vec<Bytes>) -> Bytes {
    match parts.len() {
        0 => Bytes::new(),
        1 => parts.pop().unwrap_or_default(),
        _ => {
            let mut whole = BytesMut::with_capacity(parts.iter().map(Bytes::len).sum());
            for part in parts {
                whole.extend_from_slice(&part);
            }
            whole.freeze()
        }
    }
}

/// The way out: scanned data in, aws-chunked bytes out, each chunk of the client's size and
/// (in signed mode) signed by the real key.
pub(crate) struct Rechunk {
    inner: Body,
    chain: Option<ChunkChain>,
    data: BytesMut,
    /// Framed pieces ready to go (a chunk's line, its data, its CRLF), so that data is never
    /// copied to be framed.
    out: VecDeque<Bytes>,
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
            out: VecDeque::new(),
            framing,
            inner_ended: false,
            done: false,
        }
    }

    /// Frames the next chunk into `out` when its data is all here (at the end, the last
    /// chunk and the trailers); whether it did.
    fn next_chunk(&mut self) -> Result<bool, ChunkedError> {
        let mut framing = lock(&self.framing);
        let Some((size, size_text)) = framing.sizes.front().cloned() else {
            return if self.inner_ended && !self.data.is_empty() {
                Err(ChunkedError::LengthChanged)
            } else {
                Ok(false)
            };
        };
        let size = usize::try_from(size).map_err(|_| ChunkedError::LengthChanged)?;
        if size == 0 && !self.inner_ended {
            return Ok(false);
        }
        if size == 0 && !self.data.is_empty() {
            return Err(ChunkedError::LengthChanged);
        }
        if self.data.len() < size {
            return if self.inner_ended {
                Err(ChunkedError::LengthChanged)
            } else {
                Ok(false)
            };
        }
        framing.sizes.pop_front();
        let data = self.data.split_to(size).freeze();
        let mut line = BytesMut::with_capacity(size_text.len() + 100);
        line.extend_from_slice(size_text.as_bytes());
        if let Some(chain) = &mut self.chain {
            let signature = chain.sign(&data).map_err(|_| ChunkedError::Unsignable)?;
            line.extend_from_slice(b";chunk-signature=");
            line.extend_from_slice(signature.as_bytes());
        }
        line.extend_from_slice(b"\r\n");
        if size > 0 {
            self.out.push_back(line.freeze());
            self.out.push_back(data);
            self.out.push_back(Bytes::from_static(b"\r\n"));
        } else {
            for trailer in &framing.trailers {
                line.extend_from_slice(trailer.as_bytes());
                line.extend_from_slice(b"\r\n");
            }
            line.extend_from_slice(b"\r\n");
            self.out.push_back(line.freeze());
            self.done = true;
        }
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

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt;
    use proptest::prelude::*;
    use sluice_sign::aws_sigv4::{Claim, Head};

    use super::*;

    const DATE: &str = "20261202T101500Z";

    fn key(id: &str, secret: &str) -> sluice_sign::aws_sigv4::Credentials {
        sluice_sign::aws_sigv4::Credentials::new(id, secret, None)
    }

    /// A claim for a signed-chunk upload: the chain needs its scope and date only.
    fn claim() -> Claim {
        let authorization = format!(
            "AWS4-HMAC-SHA256 Credential=PLACEHOLDERKEYID0000/20261202/eu-west-1/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature={}",
            "0".repeat(64)
        );
        let headers = [
            ("x-amz-date", DATE),
            ("x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"),
            ("authorization", authorization.as_str()),
        ];
        let head = Head {
            method: "PUT",
            host: "s3.eu-west-1.amazonaws.com",
            path_and_query: "/b/k",
            headers: headers.to_vec(),
        };
        Claim::find(&head).unwrap().unwrap()
    }

    /// `data` framed as a client frames it: chunks of `sizes` (cycled), each signed by
    /// `chain` from `seed`, and the last empty chunk.
    fn frame(data: &[u8], sizes: &[usize], chain: &mut ChunkChain) -> Vec<u8> {
        let mut out = Vec::new();
        let mut rest = data;
        for &size in sizes.iter().cycle() {
            let take = size.min(rest.len());
            let chunk = Bytes::copy_from_slice(&rest[..take]);
            rest = &rest[take..];
            let signature = chain.sign(&chunk).unwrap();
            out.extend_from_slice(format!("{take:x};chunk-signature={signature}\r\n").as_bytes());
            out.extend_from_slice(&chunk);
            out.extend_from_slice(b"\r\n");
            if take == 0 {
                break;
            }
        }
        out
    }

    /// A body arriving in pieces of `split` bytes.
    struct Pieces(VecDeque<Bytes>);

    impl HttpBody for Pieces {
        type Data = Bytes;
        type Error = BoxError;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
            Poll::Ready(self.0.pop_front().map(|b| Ok(Frame::data(b))))
        }
    }

    fn stream(bytes: Vec<u8>, split: usize) -> Pieces {
        Pieces(
            bytes
                .chunks(split.max(1))
                .map(Bytes::copy_from_slice)
                .collect(),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Whatever the data, the client's chunk sizes and how the bytes arrive, the upload
        /// leaves with the same bytes in the same chunks, each signed by the real key, and
        /// exactly as long as it came.
        #[test]
        fn signed_chunks_leave_as_they_came_signed_by_the_real_key(
            data in proptest::collection::vec(any::<u8>(), 0..3000),
            sizes in proptest::collection::vec(1usize..700, 1..4),
            split in 1usize..500,
        ) {
            let claim = claim();
            let placeholder = key("PLACEHOLDERKEYID0000", "placeholder-secret");
            let real = key("AKIAREALREALREAL0000", "real-secret");
            let seed = claim.signature().to_owned();
            let sent = frame(&data, &sizes, &mut ChunkChain::new(&placeholder, &claim, &seed));
            let framing = SharedFraming::default();
            let unchunk = Unchunk::new(
                stream(sent.clone(), split),
                Mode::Signed,
                Some(ChunkChain::new(&placeholder, &claim, &seed)),
                1 << 20,
                data.len() as u64,
                framing.clone(),
            );
            let real_seed = "1".repeat(64);
            let rechunk = Rechunk::new(
                BodyExt::boxed(unchunk),
                Some(ChunkChain::new(&real, &claim, &real_seed)),
                framing,
            );
            let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let out = runtime.block_on(rechunk.collect()).unwrap().to_bytes();
            let expected = frame(&data, &sizes, &mut ChunkChain::new(&real, &claim, &real_seed));
            prop_assert_eq!(out.len(), sent.len());
            prop_assert_eq!(out.to_vec(), expected);
        }
    }

    #[tokio::test]
    async fn a_chunk_changed_after_signing_stops_the_body_before_its_bytes_go_on() {
        let claim = claim();
        let placeholder = key("PLACEHOLDERKEYID0000", "placeholder-secret");
        let seed = claim.signature().to_owned();
        let mut sent = frame(
            b"first chunk|second chunk",
            &[12],
            &mut ChunkChain::new(&placeholder, &claim, &seed),
        );
        let at = sent.windows(6).position(|w| w == b"second").unwrap();
        sent[at] = b'S';
        let unchunk = Unchunk::new(
            stream(sent, 7),
            Mode::Signed,
            Some(ChunkChain::new(&placeholder, &claim, &seed)),
            1 << 20,
            24,
            SharedFraming::default(),
        );
        let mut body = BodyExt::boxed(unchunk);
        let mut passed = Vec::new();
        let error = loop {
            match body.frame().await {
                Some(Ok(frame)) => passed.extend_from_slice(&frame.into_data().unwrap()),
                Some(Err(error)) => break error,
                None => panic!("the changed chunk passed"),
            }
        };
        assert_eq!(passed, b"first chunk|", "only the checked chunk went on");
        assert!(matches!(
            error.downcast_ref::<ChunkedError>(),
            Some(ChunkedError::Signature)
        ));
        assert_eq!(
            refusal("aws_prod", &*error).code,
            crate::refusal::Code::SignatureInvalid
        );
    }
}
